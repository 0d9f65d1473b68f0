"""Test-case expectations: what a policy must do with a pod, checked against an evaluation.

expect:
  applies: true                 # false: the pod must pass through (schedulerName, matchConditions)
  winner: b-large-1             # the single best passing node (a tie is a failure: the
                                # scheduler would pick at random)
  winnerIn: [b-large-1, b-large-2]  # the best passing node is one of these (a tie is fine when
                                # every tied node is in the set)
  verdicts: {cp-1: reject, a-small-1: pass}
  rejectedBy: {cp-1: no-control-plane}
  extenderScores: {a-small-1: 7}            # exact extender score, 0..10
  scores: {a-small-1: {atLeast: 6, atMost: 9}}  # bounds on the extender score, 0..10
  queueKey: 11                  # the pod's queue key (its priority); null: the pod gets none

An expectation is either recorded from a preview (`record_expectation`: applies, every verdict,
the winner) or written by hand; `rerecord` turns a failing one into the smallest edit of the
same kinds that the current evaluation satisfies ("accept new results"), and
`expectation_changes` lists what that edit changes, for the review before it is accepted.
Paths in the structural errors are relative to the test case (`expect.scores.a-1.atLeast`),
dotted like the document's positions, so the editor can mark them.
"""

from __future__ import annotations

from typing import Any

from .queue import QueueKey
from .results import Evaluation

EXPECT_KEYS = (
    "applies",
    "winner",
    "winnerIn",
    "verdicts",
    "rejectedBy",
    "extenderScores",
    "scores",
    "queueKey",
)
BOUND_KEYS = ("atLeast", "atMost")
MAX_NODE_NAME = 253  # a Kubernetes object name (DNS subdomain); longer cannot be a node
EXTENDER_MAX = 10  # the extender protocol's score range is 0..10


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    """A YAML reader's word for the type of `value`, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if _is_int(value) or isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _short(value: Any) -> str:
    """repr(value), cut to a length an error message can carry (the input may be hostile)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _key(key: Any) -> str:
    """An unknown key as its field path shows it: short ones as they are."""
    return key if isinstance(key, str) and len(key) <= 63 else _short(key)


def _node_name_problem(name: Any) -> str:
    """Why `name` cannot be a node name, or ""."""
    if not isinstance(name, str) or not name:
        return f"node names must be strings, got {_short(name)}"
    if len(name) > MAX_NODE_NAME:
        return f"node name {_short(name)} is longer than {MAX_NODE_NAME} characters"
    return ""


def _node_map(expect: dict, key: str, out: list[tuple[str, str]]) -> dict[str, Any]:
    """expect[key] as a mapping from node names, or {} with an error in `out`."""
    value = expect[key]
    if not isinstance(value, dict):
        out.append((f"expect.{key}", f"must map node names to values, got {_kind(value)}"))
        return {}
    good = {}
    for name, item in value.items():
        problem = _node_name_problem(name)
        if problem:
            out.append((f"expect.{key}", problem))
        else:
            good[name] = item
    return good


def expect_errors(expect: Any) -> list[tuple[str, str]]:
    """Every structural problem of an `expect` mapping as (field path, message); [] when usable."""
    if not isinstance(expect, dict):
        return [("expect", f"expect must be a mapping, got {_kind(expect)}")]
    out: list[tuple[str, str]] = []
    if not expect:
        out.append(("expect", f"expect is empty: give at least one of {', '.join(EXPECT_KEYS)}"))
    for key in expect:
        if key not in EXPECT_KEYS:
            out.append((f"expect.{_key(key)}", f"unknown key (use {', '.join(EXPECT_KEYS)})"))
    if "applies" in expect and not isinstance(expect["applies"], bool):
        out.append(("expect.applies", f"must be true or false, got {_kind(expect['applies'])}"))
    if "winner" in expect:
        if not (isinstance(expect["winner"], str) and expect["winner"]):
            out.append(("expect.winner", f"must be a node name, got {_kind(expect['winner'])}"))
        elif _node_name_problem(expect["winner"]):
            out.append(("expect.winner", _node_name_problem(expect["winner"])))
    if "queueKey" in expect and not (expect["queueKey"] is None or _is_int(expect["queueKey"])):
        out.append(
            ("expect.queueKey", f"must be an integer or null, got {_kind(expect['queueKey'])}")
        )
    if "winner" in expect and "winnerIn" in expect:
        out.append(("expect.winnerIn", "give winner (one node) or winnerIn (a set), not both"))
    if "winnerIn" in expect:
        value = expect["winnerIn"]
        if not isinstance(value, list) or not value:
            out.append(
                ("expect.winnerIn", f"must be a non-empty list of node names, got {_kind(value)}")
            )
        else:
            seen: set[str] = set()
            for i, name in enumerate(value):
                if not isinstance(name, str) or not name:
                    out.append((f"expect.winnerIn[{i}]", f"must be a node name, got {_kind(name)}"))
                elif _node_name_problem(name):
                    out.append((f"expect.winnerIn[{i}]", _node_name_problem(name)))
                elif name in seen:
                    out.append((f"expect.winnerIn[{i}]", f"{name} is listed twice"))
                else:
                    seen.add(name)
    if "verdicts" in expect:
        for name, verdict in _node_map(expect, "verdicts", out).items():
            if verdict not in ("pass", "reject"):
                out.append(
                    (f"expect.verdicts.{name}", f"must be pass or reject, got {_short(verdict)}")
                )
    if "rejectedBy" in expect:
        for name, rule in _node_map(expect, "rejectedBy", out).items():
            if not isinstance(rule, str) or not rule:
                out.append((f"expect.rejectedBy.{name}", f"must be a rule name, got {_kind(rule)}"))
    if "extenderScores" in expect:
        for name, score in _node_map(expect, "extenderScores", out).items():
            if not _is_int(score) or not 0 <= score <= EXTENDER_MAX:
                out.append(
                    (
                        f"expect.extenderScores.{name}",
                        f"must be an integer from 0 to {EXTENDER_MAX}, got {_short(score)}",
                    )
                )
    if "scores" in expect:
        for name, bounds in _node_map(expect, "scores", out).items():
            out += _bounds_errors(f"expect.scores.{name}", bounds)
    return out


def _bounds_errors(path: str, bounds: Any) -> list[tuple[str, str]]:
    if not isinstance(bounds, dict) or not bounds:
        return [(path, f"must be a mapping with atLeast and/or atMost, got {_kind(bounds)}")]
    out = []
    for key, value in bounds.items():
        if key not in BOUND_KEYS:
            out.append((f"{path}.{_key(key)}", "unknown key (use atLeast, atMost)"))
        elif not _is_int(value) or not 0 <= value <= EXTENDER_MAX:
            out.append(
                (
                    f"{path}.{key}",
                    f"must be an integer from 0 to {EXTENDER_MAX}, got {_short(value)}",
                )
            )
    low, high = bounds.get("atLeast"), bounds.get("atMost")
    if not out and low is not None and high is not None and low > high:
        out.append((f"{path}.atLeast", f"atLeast {low} is above atMost {high}"))
    return out


def expect_problems(expect: Any) -> list[str]:
    """The structural problems as `path: message` sentences (the CLI's and logs' form)."""
    return [f"{path}: {message}" for path, message in expect_errors(expect)]


def _bounds_text(bounds: dict[str, int]) -> str:
    parts = []
    if "atLeast" in bounds:
        parts.append(f"at least {bounds['atLeast']}")
    if "atMost" in bounds:
        parts.append(f"at most {bounds['atMost']}")
    return " and ".join(parts)


def check_expectations(
    evaluation: Evaluation, expect: dict[str, Any], queue_key: QueueKey | None = None
) -> list[str]:
    """Every way `evaluation` (and the pod's `queue_key`) differs from `expect`, as sentences;
    [] when it matches."""
    failures: list[str] = []
    if "queueKey" in expect:
        got = queue_key.key if queue_key is not None else None
        if got != expect["queueKey"]:
            why = f" ({queue_key.reason})" if queue_key is not None and queue_key.reason else ""
            failures.append(f"expected queue key {expect['queueKey']}, got {got}{why}")
    index = {name: i for i, name in enumerate(evaluation.node_names)}

    def node_index(name: str) -> int | None:
        if name not in index:
            failures.append(f"node {name} is not in the cluster")
            return None
        return index[name]

    def why_rejected(i: int) -> str:
        return f"{evaluation.failed_rule[i]}: {evaluation.messages[i]}"

    if "applies" in expect and expect["applies"] != evaluation.applies:
        if expect["applies"]:
            failures.append(
                f"expected the policy to apply, but the pod passes through: {evaluation.reason}"
            )
        else:
            failures.append("expected the pod to pass through, but the policy applies")
    if "winner" in expect:
        winners = evaluation.winners()
        wanted = expect["winner"]
        if not evaluation.applies:
            failures.append(
                f"expected winner {wanted}, but the pod passes through: {evaluation.reason}"
            )
        elif not winners:
            failures.append(f"expected winner {wanted}, but no node passes")
        elif wanted not in winners:
            best = ", ".join(winners)
            failures.append(
                f"expected winner {wanted}, got {best} (total {evaluation.total[index[winners[0]]]:.2f})"
            )
        elif len(winners) > 1:
            others = ", ".join(w for w in winners if w != wanted)
            failures.append(
                f"expected winner {wanted}, but it ties with {others}; the scheduler would pick at random"
            )
    if "winnerIn" in expect:
        winners = evaluation.winners()
        wanted_set = ", ".join(expect["winnerIn"])
        outside = [w for w in winners if w not in expect["winnerIn"]]
        if not evaluation.applies:
            failures.append(
                f"expected the winner among {wanted_set}, but the pod passes through: "
                f"{evaluation.reason}"
            )
        elif not winners:
            failures.append(f"expected the winner among {wanted_set}, but no node passes")
        elif outside:
            got = ", ".join(winners)
            total = evaluation.total[index[winners[0]]]
            tie = " (a tie: the scheduler would pick at random)" if len(winners) > 1 else ""
            failures.append(
                f"expected the winner among {wanted_set}, got {got} (total {total:.2f}){tie}"
            )
    for name, verdict in (expect.get("verdicts") or {}).items():
        i = node_index(name)
        if i is not None:
            actual = "pass" if evaluation.passed[i] else "reject"
            if actual != verdict:
                why = f" ({why_rejected(i)})" if actual == "reject" else ""
                failures.append(f"node {name}: expected {verdict}, got {actual}{why}")
    for name, rule in (expect.get("rejectedBy") or {}).items():
        i = node_index(name)
        if i is not None and evaluation.failed_rule[i] != rule:
            actual = evaluation.failed_rule[i] or "nothing (it passes)"
            failures.append(f"node {name}: expected rejection by {rule}, got {actual}")
    for name, score in (expect.get("extenderScores") or {}).items():
        i = node_index(name)
        if i is not None and evaluation.extender[i] != score:
            failures.append(
                f"node {name}: expected extender score {score}, got {evaluation.extender[i]}"
            )
    for name, bounds in (expect.get("scores") or {}).items():
        i = node_index(name)
        if i is None:
            continue
        wanted = _bounds_text(bounds)
        if not evaluation.applies:
            failures.append(
                f"node {name}: expected extender score {wanted}, but the pod passes through: "
                f"{evaluation.reason}"
            )
        elif not evaluation.passed[i]:
            # a rejected node gets no score from kube-scheduler: no bound holds
            failures.append(
                f"node {name}: expected extender score {wanted}, but it is rejected "
                f"({why_rejected(i)})"
            )
        else:
            got = evaluation.extender[i]
            if got < bounds.get("atLeast", 0) or got > bounds.get("atMost", EXTENDER_MAX):
                failures.append(f"node {name}: expected extender score {wanted}, got {got}")
    return failures


# --- recording and accepting new results -------------------------------------------------------


def record_expectation(evaluation: Evaluation) -> dict[str, Any]:
    """What the evaluation shows, as an `expect`: whether the policy applies, every node's
    verdict, and the winner when there is exactly one (a tie is left out: the scheduler would
    pick at random, and a test expecting either would fail)."""
    if not evaluation.applies:
        return {"applies": False}
    expect: dict[str, Any] = {
        "applies": True,
        "verdicts": {
            name: "pass" if ok else "reject"
            for name, ok in zip(evaluation.node_names, evaluation.passed)
        },
    }
    winners = evaluation.winners()
    if len(winners) == 1:
        expect["winner"] = winners[0]
    return expect


def rerecord(
    evaluation: Evaluation, expect: dict[str, Any], queue_key: QueueKey | None = None
) -> dict[str, Any]:
    """`_rerecord_nodes`, with an expected `queueKey` moved to the pod's current key."""
    out = _rerecord_nodes(evaluation, {k: v for k, v in expect.items() if k != "queueKey"})
    if "queueKey" in expect:
        if not any(k != "queueKey" for k in expect):  # a queue-only expectation stays one
            out = {}
        out["queueKey"] = queue_key.key if queue_key is not None else None
    return out


def _rerecord_nodes(evaluation: Evaluation, expect: dict[str, Any]) -> dict[str, Any]:
    """`expect` edited so that `evaluation` satisfies it, keeping its kinds and nodes: each
    part that holds stays as written, each that fails takes the current result (a bound moves
    to the score it got; a node that left the cluster is dropped; a node expected to be rejected
    by a rule that now passes, or scored that is now rejected, becomes a verdict). A pod that now
    passes through keeps only `applies: false`; one expected to pass through that now applies,
    or an expectation left empty, is recorded afresh."""
    if not evaluation.applies:
        return {"applies": False}
    if expect.get("applies") is False:
        return record_expectation(evaluation)
    index = {name: i for i, name in enumerate(evaluation.node_names)}
    winners = evaluation.winners()
    out: dict[str, Any] = {}
    moved: dict[str, str] = {}  # verdicts that replace rejectedBy or scores entries

    def verdict(i: int) -> str:
        return "pass" if evaluation.passed[i] else "reject"

    for key, value in expect.items():
        if key == "applies":
            out["applies"] = True
        elif key in ("winner", "winnerIn"):
            if key == "winnerIn" and winners and all(w in value for w in winners):
                out["winnerIn"] = list(value)
            elif len(winners) == 1:
                out["winner"] = winners[0]
            elif winners:  # a tie: any of them may win
                out["winnerIn"] = list(winners)
        elif key == "verdicts":
            out["verdicts"] = {n: verdict(index[n]) for n in value if n in index}
        elif key == "rejectedBy":
            kept = {}
            for name in value:
                if name in index:
                    i = index[name]
                    if evaluation.passed[i]:
                        moved[name] = "pass"
                    else:
                        kept[name] = evaluation.failed_rule[i]
            out["rejectedBy"] = kept
        elif key == "extenderScores":
            out["extenderScores"] = {n: evaluation.extender[index[n]] for n in value if n in index}
        elif key == "scores":
            kept = {}
            for name, bounds in value.items():
                if name not in index:
                    continue
                i = index[name]
                if not evaluation.passed[i]:
                    moved[name] = "reject"
                    continue
                got = evaluation.extender[i]
                new = dict(bounds)
                if new.get("atLeast", 0) > got:
                    new["atLeast"] = got
                if new.get("atMost", EXTENDER_MAX) < got:
                    new["atMost"] = got
                kept[name] = new
            out["scores"] = kept
    if moved:
        verdicts = out.setdefault("verdicts", {})
        for name, value in moved.items():
            if not (value == "reject" and name in out.get("rejectedBy", {})):  # said already
                verdicts.setdefault(name, value)
    out = {k: v for k, v in out.items() if v != {}}
    if not out or (set(out) == {"applies"} and set(expect) != {"applies"}):
        return record_expectation(evaluation)
    return out


def expect_canonical(expect: Any) -> Any:
    """`expect` in one order whatever the storage (PostgreSQL's jsonb sorts keys its own way):
    kinds in EXPECT_KEYS order, node maps by node name, atLeast before atMost. What the UI
    shows, the API answers and `policy export` writes."""
    if not isinstance(expect, dict):
        return expect
    rank = {key: i for i, key in enumerate(EXPECT_KEYS)}
    out: dict[Any, Any] = {}
    for key in sorted(expect, key=lambda k: (rank.get(k, len(rank)), str(k))):
        value = expect[key]
        if isinstance(value, dict):
            value = {
                name: (
                    {b: item[b] for b in sorted(item, key=lambda b: (b not in BOUND_KEYS, b))}
                    if isinstance(item, dict)
                    else item
                )
                for name, item in sorted(value.items(), key=lambda kv: str(kv[0]))
            }
        out[key] = value
    return out


def _leaves(expect: dict[str, Any]) -> dict[str, Any]:
    """`expect` flattened to dotted paths (node maps one level down, score bounds two)."""
    out: dict[str, Any] = {}
    for key, value in expect.items():
        if isinstance(value, dict):
            for name, item in value.items():
                if isinstance(item, dict):
                    for bound, number in item.items():
                        out[f"{key}.{name}.{bound}"] = number
                else:
                    out[f"{key}.{name}"] = item
        else:
            out[key] = value
    return out


def _change_order(path: str) -> tuple[int, str]:
    """Kinds in EXPECT_KEYS order, then paths by name: the same order whatever the storage
    (PostgreSQL's jsonb does not keep the order of keys)."""
    kind = path.split(".", 1)[0]
    return (EXPECT_KEYS.index(kind) if kind in EXPECT_KEYS else len(EXPECT_KEYS), path)


def expectation_changes(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """What replacing `old` by `new` changes: [{path, old, new}], None for a side that has no
    such entry, ordered by kind (EXPECT_KEYS) and then path."""
    before, after = _leaves(old), _leaves(new)
    paths = sorted(set(before) | set(after), key=_change_order)
    return [
        {"path": p, "old": before.get(p), "new": after.get(p)}
        for p in paths
        if before.get(p) != after.get(p)
    ]
