"""Test-case expectations: what must happen to a pod, checked against kube-scheduler's answer
(a Placement, policies/engine/placement.py) and the policy's own evaluation.

expect:
  # where kube-scheduler puts the pod (the product's one answer)
  landsIn: [c-mem-1, a-small-3]  # kube-scheduler's pick is among these (a tie passes when every
                                 # tied node is listed: it picks one of them at random)
  unschedulable: true            # no node: true, or reasons that must be among those it gives
                                 # (a part of a reason is enough); false: it gets a node
  rejectedBy: {cp-1: TaintToleration, a-1: no-gpu}  # a kube-scheduler filter plugin rejects the
                                 # node, or a rule of the policy (the policy over every node)
  applies: true                  # false: the pod passes through (schedulerName, matchConditions)
  # the policy alone over every node (policy-level; not where the pod lands)
  scores: {a-small-1: {atLeast: 6, atMost: 9}}  # bounds on the policy's score, 0..10
  extenderScores: {a-small-1: 7}  # the policy's exact score, 0..10
  verdicts: {cp-1: reject, a-small-1: pass}   # the policy's filter verdicts
  winner: b-large-1              # the policy's single top-scored node (older documents)
  winnerIn: [b-large-1, b-large-2]  # the policy's top-scored nodes are among these
  queueKey: 11                   # the pod's queue key (its priority); null: the pod gets none

An expectation is either recorded from a preview (`record_expectation`: the pick and the nodes
the policy rejects by default; the author chooses) or written by hand; `rerecord` turns a
failing one into the smallest edit of the same kinds that the current results satisfy ("accept
new results"), and `expectation_changes` lists what that edit changes, for the review before it
is accepted. Paths in the structural errors are relative to the test case
(`expect.scores.a-1.atLeast`), dotted like the document's positions, so the editor can mark them.
"""

from __future__ import annotations

from typing import Any

from .placement import Placement
from .queue import QueueKey
from .results import Evaluation

EXPECT_KEYS = (
    "applies",
    "landsIn",
    "unschedulable",
    "winner",
    "winnerIn",
    "verdicts",
    "rejectedBy",
    "extenderScores",
    "scores",
    "queueKey",
)
BOUND_KEYS = ("atLeast", "atMost")
# the kinds that speak of the policy alone over every node, not of where the pod lands
POLICY_LEVEL_KEYS = ("winner", "winnerIn", "verdicts", "extenderScores", "scores")
# what "Add as test case" can pin; the default is the pick and the nodes the policy rejects
PINS = ("pick", "policyRejects", "pluginRejects", "applies")
DEFAULT_PINS = ("pick", "policyRejects")
MAX_REASONS = 100  # reasons an `unschedulable` list may give
MAX_REASON_CHARS = 1024
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
    for key in ("winnerIn", "landsIn"):
        if key in expect:
            out += _node_list_errors(f"expect.{key}", expect[key])
    if "unschedulable" in expect:
        out += _reasons_errors(expect["unschedulable"])
        if "landsIn" in expect and expect["unschedulable"] is not False:
            out.append(
                (
                    "expect.unschedulable",
                    "give landsIn (the pod gets a node) or unschedulable, not both",
                )
            )
    if "verdicts" in expect:
        for name, verdict in _node_map(expect, "verdicts", out).items():
            if verdict not in ("pass", "reject"):
                out.append(
                    (f"expect.verdicts.{name}", f"must be pass or reject, got {_short(verdict)}")
                )
    if "rejectedBy" in expect:
        for name, rule in _node_map(expect, "rejectedBy", out).items():
            if not isinstance(rule, str) or not rule:
                out.append(
                    (
                        f"expect.rejectedBy.{name}",
                        f"must be a rule or filter plugin name, got {_kind(rule)}",
                    )
                )
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


def _node_list_errors(path: str, value: Any) -> list[tuple[str, str]]:
    """A non-empty list of distinct node names (winnerIn, landsIn)."""
    if not isinstance(value, list) or not value:
        return [(path, f"must be a non-empty list of node names, got {_kind(value)}")]
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i, name in enumerate(value):
        if not isinstance(name, str) or not name:
            out.append((f"{path}[{i}]", f"must be a node name, got {_kind(name)}"))
        elif _node_name_problem(name):
            out.append((f"{path}[{i}]", _node_name_problem(name)))
        elif name in seen:
            out.append((f"{path}[{i}]", f"{name} is listed twice"))
        else:
            seen.add(name)
    return out


def _reasons_errors(value: Any) -> list[tuple[str, str]]:
    """`unschedulable`: true, false, or a non-empty list of reasons (bounded strings)."""
    path = "expect.unschedulable"
    if isinstance(value, bool):
        return []
    if not isinstance(value, list) or not value:
        return [(path, f"must be true, false or a non-empty list of reasons, got {_kind(value)}")]
    if len(value) > MAX_REASONS:
        return [(path, f"give at most {MAX_REASONS} reasons, got {len(value)}")]
    out = []
    for i, reason in enumerate(value):
        if not isinstance(reason, str) or not reason.strip():
            out.append((f"{path}[{i}]", f"must be a reason (text), got {_kind(reason)}"))
        elif len(reason) > MAX_REASON_CHARS:
            out.append((f"{path}[{i}]", f"is longer than {MAX_REASON_CHARS} characters"))
    return out


def needs_placement(expect: dict[str, Any]) -> bool:
    """Whether checking `expect` needs kube-scheduler's answer: landsIn, unschedulable, or a
    rejectedBy (whose names may be kube-scheduler's filter plugins, which the model knows)."""
    return "landsIn" in expect or "unschedulable" in expect or "rejectedBy" in expect


def _plugins(placement: Placement | None) -> tuple[str, ...]:
    """The filter plugin names a rejectedBy may give (none without kube-scheduler's answer:
    then every name is a rule's)."""
    return placement.filter_plugins if placement is not None else ()


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


def _landing(placement: Placement) -> str:
    """Where the pod lands, for a failure: "lands on X (final total 586)" or "unschedulable..."."""
    text = placement.summary()
    total = placement.final_total()
    return f"{text} (final total {total})" if total is not None else text


def _found(wanted: str, reasons: dict[str, int]) -> bool:
    """A reason of `unschedulable` holds when it is a part of a reason kube-scheduler gives."""
    return any(wanted in reason for reason in reasons)


def _check_placement(
    evaluation: Evaluation, expect: dict[str, Any], placement: Placement | None
) -> list[str]:
    """The kube-scheduler-level kinds: landsIn, unschedulable, rejectedBy a filter plugin."""
    failures: list[str] = []
    if placement is None:  # a caller without the model (unit tests of the other kinds)
        if "landsIn" in expect or "unschedulable" in expect:
            failures.append("kube-scheduler's answer is not available to check this case")
        return failures
    plugin_rejections = {
        name: plugin
        for name, plugin in (expect.get("rejectedBy") or {}).items()
        if plugin in placement.filter_plugins
    }
    if "landsIn" in expect:
        wanted = ", ".join(expect["landsIn"])
        outside = [n for n in placement.pick if n not in expect["landsIn"]]
        if not placement.scheduled:
            failures.append(
                f"expected the pod to land in {wanted}, but it is {_landing(placement)}"
            )
        elif outside:
            failures.append(
                f"expected the pod to land in {wanted}, but kube-scheduler "
                + _landing(placement).replace("lands on", "picks", 1)
            )
    if "unschedulable" in expect:
        value = expect["unschedulable"]
        if value is False and not placement.scheduled:
            failures.append(f"expected the pod to get a node, but it is {_landing(placement)}")
        elif value is not False and placement.scheduled:
            failures.append(f"expected the pod to be unschedulable, but it {_landing(placement)}")
        elif isinstance(value, list):
            reasons = placement.reasons()
            given = "; ".join(f"{count}x {reason}" for reason, count in reasons.items())
            for wanted in value:
                if not _found(wanted, reasons):
                    failures.append(
                        f"expected the reason {_short(wanted)}, but kube-scheduler gives: "
                        f"{given or 'none'}"
                    )
    index = {name: i for i, name in enumerate(evaluation.node_names)}
    for name, plugin in plugin_rejections.items():
        node = placement.node(name)
        if node is None:
            failures.append(f"node {name} is not in the cluster")
            continue
        i = index.get(name)
        rule = evaluation.failed_rule[i] if i is not None else None
        if node.plugin == plugin or rule == plugin:  # a rule may carry a plugin's name
            continue
        got = node.plugin or node.rule or rule or "nothing (it passes every filter)"
        failures.append(f"node {name}: expected rejection by {plugin}, got {got}")
    return failures


def check_expectations(
    evaluation: Evaluation,
    expect: dict[str, Any],
    queue_key: QueueKey | None = None,
    placement: Placement | None = None,
) -> list[str]:
    """Every way kube-scheduler's answer (`placement`), the policy's evaluation over every node
    and the pod's `queue_key` differ from `expect`, as sentences; [] when they match."""
    failures: list[str] = []
    if "queueKey" in expect:
        got = queue_key.key if queue_key is not None else None
        if got != expect["queueKey"]:
            why = f" ({queue_key.reason})" if queue_key is not None and queue_key.reason else ""
            failures.append(f"expected queue key {expect['queueKey']}, got {got}{why}")
    failures += _check_placement(evaluation, expect, placement)
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
    # winner and winnerIn are policy-level: the policy's top score over every node of the
    # cluster, before kube-scheduler's filters and plugins (landsIn says where the pod lands)
    if "winner" in expect:
        winners = evaluation.winners()
        wanted = expect["winner"]
        what = f"expected the policy's top node (policy-level winner) {wanted}"
        if not evaluation.applies:
            failures.append(f"{what}, but the pod passes through: {evaluation.reason}")
        elif not winners:
            failures.append(f"{what}, but no node passes the policy")
        elif wanted not in winners:
            best = ", ".join(winners)
            failures.append(
                f"{what}, got {best} (policy total {evaluation.total[index[winners[0]]]:.2f})"
            )
        elif len(winners) > 1:
            others = ", ".join(w for w in winners if w != wanted)
            failures.append(f"{what}, but it ties with {others}")
    if "winnerIn" in expect:
        winners = evaluation.winners()
        wanted_set = ", ".join(expect["winnerIn"])
        what = f"expected the policy's top node (policy-level winnerIn) among {wanted_set}"
        outside = [w for w in winners if w not in expect["winnerIn"]]
        if not evaluation.applies:
            failures.append(f"{what}, but the pod passes through: {evaluation.reason}")
        elif not winners:
            failures.append(f"{what}, but no node passes the policy")
        elif outside:
            got = ", ".join(winners)
            total = evaluation.total[index[winners[0]]]
            failures.append(f"{what}, got {got} (policy total {total:.2f})")
    for name, verdict in (expect.get("verdicts") or {}).items():
        i = node_index(name)
        if i is not None:
            actual = "pass" if evaluation.passed[i] else "reject"
            if actual != verdict:
                why = f" ({why_rejected(i)})" if actual == "reject" else ""
                failures.append(f"node {name}: expected the policy's {verdict}, got {actual}{why}")
    plugins = _plugins(placement)
    for name, rule in (expect.get("rejectedBy") or {}).items():
        if rule in plugins:
            continue  # checked against kube-scheduler's filters above
        i = node_index(name)
        if i is not None and evaluation.failed_rule[i] != rule:
            actual = evaluation.failed_rule[i] or "nothing (the policy passes it)"
            failures.append(f"node {name}: expected rejection by {rule}, got {actual}")
    for name, score in (expect.get("extenderScores") or {}).items():
        i = node_index(name)
        if i is not None and evaluation.extender[i] != score:
            failures.append(
                f"node {name}: expected policy score {score}, got {evaluation.extender[i]}"
            )
    for name, bounds in (expect.get("scores") or {}).items():
        i = node_index(name)
        if i is None:
            continue
        wanted = _bounds_text(bounds)
        if not evaluation.applies:
            failures.append(
                f"node {name}: expected policy score {wanted}, but the pod passes through: "
                f"{evaluation.reason}"
            )
        elif not evaluation.passed[i]:
            # a rejected node gets no score: no bound holds
            failures.append(
                f"node {name}: expected policy score {wanted}, but the policy rejects it "
                f"({why_rejected(i)})"
            )
        else:
            got = evaluation.extender[i]
            if got < bounds.get("atLeast", 0) or got > bounds.get("atMost", EXTENDER_MAX):
                failures.append(f"node {name}: expected policy score {wanted}, got {got}")
    return failures


# --- recording and accepting new results -------------------------------------------------------


def _reasons_list(placement: Placement) -> list[str] | bool:
    """The reasons kube-scheduler gives, most common first, as `unschedulable` records them
    (cut to the bounds a hand-written list has; a prefix still matches)."""
    reasons = [r[:MAX_REASON_CHARS] for r in placement.reasons()][:MAX_REASONS]
    return reasons or True


def record_expectation(
    evaluation: Evaluation, placement: Placement, pins: tuple[str, ...] | None = None
) -> dict[str, Any]:
    """What the preview shows, as an `expect`, pinning only what `pins` names (PINS; default:
    DEFAULT_PINS, and `applies` when the pod passes through):

    - pick: `landsIn` kube-scheduler's tie group, or `unschedulable` with the reasons it gives;
    - policyRejects: `rejectedBy` the rule, for each node kube-scheduler sends the policy and
      the policy rejects;
    - pluginRejects: `rejectedBy` the plugin, for each node kube-scheduler's filters reject;
    - applies: whether the policy applies.

    Never every node's verdict: a case that names only what matters survives a node added to
    the cluster."""
    if pins is None:
        pins = DEFAULT_PINS if evaluation.applies else (*DEFAULT_PINS, "applies")
    expect: dict[str, Any] = {}
    if "applies" in pins:
        expect["applies"] = evaluation.applies
    if "pick" in pins:
        if placement.scheduled:
            expect["landsIn"] = list(placement.pick)
        else:
            expect["unschedulable"] = _reasons_list(placement)
    rejected: dict[str, str] = {}
    if "pluginRejects" in pins:
        rejected |= {n.node: n.plugin for n in placement.nodes if n.plugin}
    if "policyRejects" in pins:
        rejected |= {n.node: n.rule for n in placement.nodes if n.rule}
    if rejected:
        expect["rejectedBy"] = dict(sorted(rejected.items()))
    return expect or {"applies": evaluation.applies}


def rerecord(
    evaluation: Evaluation,
    expect: dict[str, Any],
    queue_key: QueueKey | None = None,
    placement: Placement | None = None,
) -> dict[str, Any]:
    """`_rerecord_nodes`, with an expected `queueKey` moved to the pod's current key.
    `placement` (kube-scheduler's answer) is needed unless `expect` has only policy-level
    kinds and the result need not be recorded afresh."""
    out = _rerecord_nodes(
        evaluation, {k: v for k, v in expect.items() if k != "queueKey"}, placement
    )
    if "queueKey" in expect:
        if not any(k != "queueKey" for k in expect):  # a queue-only expectation stays one
            out = {}
        out["queueKey"] = queue_key.key if queue_key is not None else None
    return out


def _rerecord_pick(placement: Placement, expect: dict[str, Any]) -> dict[str, Any]:
    """landsIn and unschedulable edited to kube-scheduler's answer: a set that still holds
    stays; a pod that now gets a node lands in its pick; one that now gets none is
    unschedulable with the reasons it gives (listed reasons still given are kept)."""
    out: dict[str, Any] = {}
    if "landsIn" in expect:
        if not placement.scheduled:
            out["unschedulable"] = _reasons_list(placement)
        elif all(n in expect["landsIn"] for n in placement.pick):
            out["landsIn"] = list(expect["landsIn"])
        else:
            out["landsIn"] = list(placement.pick)
    if "unschedulable" in expect:
        value = expect["unschedulable"]
        if placement.scheduled:
            if value is False:
                out["unschedulable"] = False
            else:
                out["landsIn"] = list(placement.pick)
        elif isinstance(value, list):
            reasons = placement.reasons()
            out["unschedulable"] = [r for r in value if _found(r, reasons)] or _reasons_list(
                placement
            )
        else:  # true stays true; false becomes the reasons
            out["unschedulable"] = value or _reasons_list(placement)
    return out


def _rerecord_nodes(
    evaluation: Evaluation, expect: dict[str, Any], placement: Placement | None
) -> dict[str, Any]:
    """`expect` edited so that the results satisfy it, keeping its kinds and nodes: each part
    that holds stays as written, each that fails takes the current result (a bound moves to the
    score it got; a node that left the cluster is dropped; a node expected to be rejected by a
    rule or plugin that now passes, or scored that is now rejected, becomes a verdict; landsIn
    and unschedulable follow kube-scheduler's answer). A pod that now passes through keeps only
    `applies: false` (and where it lands); one expected to pass through that now applies, or an
    expectation left empty, is recorded afresh."""
    pick = _rerecord_pick(placement, expect) if placement is not None else {}

    def afresh() -> dict[str, Any]:
        if placement is None:
            raise ValueError("recording afresh needs kube-scheduler's answer (placement)")
        return record_expectation(evaluation, placement)

    if not evaluation.applies:
        return {"applies": False, **pick}
    if expect.get("applies") is False:
        return afresh()
    index = {name: i for i, name in enumerate(evaluation.node_names)}
    winners = evaluation.winners()
    out: dict[str, Any] = {}
    moved: dict[str, str] = {}  # verdicts that replace rejectedBy or scores entries

    def verdict(i: int) -> str:
        return "pass" if evaluation.passed[i] else "reject"

    for key, value in expect.items():
        if key == "applies":
            out["applies"] = True
        elif key in ("landsIn", "unschedulable"):
            out.update(pick)
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
            for name, was in value.items():
                if name not in index:
                    continue
                i = index[name]
                node = placement.node(name) if placement is not None else None
                if node is not None and was in placement.filter_plugins and node.plugin:
                    kept[name] = node.plugin
                elif not evaluation.passed[i]:
                    kept[name] = evaluation.failed_rule[i]
                elif node is not None and node.plugin:
                    kept[name] = node.plugin
                else:
                    moved[name] = "pass"
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
        return afresh()
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
