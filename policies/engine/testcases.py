"""Test-case expectations: what a policy must do with a pod, checked against an evaluation.

expect:
  applies: true                 # false: the pod must pass through (schedulerName, matchConditions)
  winner: b-large-1             # the single best passing node (a tie is a failure: the
                                # scheduler would pick at random)
  verdicts: {cp-1: reject, a-small-1: pass}
  rejectedBy: {cp-1: no-control-plane}
  extenderScores: {a-small-1: 7}
  queueKey: 11                  # the pod's queue key (its priority); null: the pod gets none
"""

from __future__ import annotations

from typing import Any

from .queue import QueueKey
from .results import Evaluation

EXPECT_KEYS = ("applies", "winner", "verdicts", "rejectedBy", "extenderScores", "queueKey")


def expect_problems(expect: Any) -> list[str]:
    """Structural problems of an `expect` mapping (empty when it is usable)."""
    if not isinstance(expect, dict):
        return ["expect must be a mapping"]
    problems = []
    if not expect:
        problems.append(f"expect is empty: give at least one of {', '.join(EXPECT_KEYS)}")
    for key in expect:
        if key not in EXPECT_KEYS:
            problems.append(f"expect.{key}: unknown key (use {', '.join(EXPECT_KEYS)})")
    if "applies" in expect and not isinstance(expect["applies"], bool):
        problems.append("expect.applies must be true or false")
    if "winner" in expect and not isinstance(expect["winner"], str):
        problems.append("expect.winner must be a node name")
    if "queueKey" in expect and (
        isinstance(expect["queueKey"], bool) or not isinstance(expect["queueKey"], int | type(None))
    ):
        problems.append("expect.queueKey must be an integer or null")
    for key, allowed in (("verdicts", (str,)), ("rejectedBy", (str,)), ("extenderScores", (int,))):
        value = expect.get(key)
        if value is None:
            continue
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, allowed) and not isinstance(v, bool)
            for k, v in value.items()
        ):
            problems.append(
                f"expect.{key} must map node names to {'integers' if key == 'extenderScores' else 'strings'}"
            )
        elif key == "verdicts" and any(v not in ("pass", "reject") for v in value.values()):
            problems.append("expect.verdicts values must be pass or reject")
    return problems


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
    for name, verdict in (expect.get("verdicts") or {}).items():
        i = node_index(name)
        if i is not None:
            actual = "pass" if evaluation.passed[i] else "reject"
            if actual != verdict:
                why = (
                    f" ({evaluation.failed_rule[i]}: {evaluation.messages[i]})"
                    if actual == "reject"
                    else ""
                )
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
    return failures
