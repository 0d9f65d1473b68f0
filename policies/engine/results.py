"""What an evaluation returns: per-node verdicts and every intermediate score value.

Columnar (one list per quantity, indexed like the candidate nodes) because the extender reads a
column or two for hundreds of nodes per request; `rows()` builds per-node objects for
explanations (preview tables, decisions, the CLI).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import compress
from typing import Any

from .placement import competition_ranks


@dataclass(frozen=True, slots=True)
class RuleError:
    """An evaluation error of one rule on one node ("division by zero")."""

    rule: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "message": self.message}


@dataclass(frozen=True, slots=True)
class ScoreDetail:
    """One score rule on one node: raw -> normalized (0..100) -> weighted (normalized x weight)."""

    name: str
    raw: int | float | None
    normalized: float
    weight: int
    weighted: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "raw": self.raw,
            "normalized": round(self.normalized, 4),
            "weight": self.weight,
            "weighted": round(self.weighted, 4),
        }


@dataclass(frozen=True, slots=True)
class NodeResult:
    """One node's verdict and score breakdown."""

    node: str
    passed: bool
    failed_rule: str | None
    message: str | None
    unresolvable: bool
    errors: tuple[RuleError, ...]
    scores: tuple[ScoreDetail, ...]
    total: float
    extender_score: int

    @property
    def verdict(self) -> str:
        return "pass" if self.passed else "reject"

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "verdict": self.verdict,
            "failedRule": self.failed_rule,
            "message": self.message,
            "unresolvable": self.unresolvable,
            "errors": [e.to_dict() for e in self.errors],
            "scores": [s.to_dict() for s in self.scores],
            "total": round(self.total, 4),
            "extenderScore": self.extender_score,
        }


@dataclass(slots=True)
class Evaluation:
    """A policy applied to one pod over candidate nodes.

    `applies` is False when the pod passes through (another schedulerName, a false
    matchCondition): then every node passes and nothing is scored. `stopped` is set when the
    caller's budget ran out first: the nodes not judged follow failurePolicy.
    """

    policy: str
    applies: bool
    reason: str
    node_names: list[str]
    passed: list[bool]
    failed_rule: list[str | None]
    messages: list[str | None]
    unresolvable: list[bool]
    errors: dict[int, list[RuleError]]  # node index -> errors (sparse)
    score_names: list[str] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)
    raw: list[list[int | float | None]] = field(default_factory=list)  # [score][node]
    normalized: list[list[float]] = field(default_factory=list)
    total: list[float] = field(default_factory=list)
    extender: list[int] = field(default_factory=list)
    scored: bool = True
    # set when a budget (deadline.budget) stopped the evaluation: how many nodes it did not
    # judge and that they follow failurePolicy (their errors say so too)
    stopped: str | None = None

    @property
    def size(self) -> int:
        return len(self.node_names)

    def rows(self) -> list[NodeResult]:
        """Per-node results, in candidate order."""
        rows = []
        for i, name in enumerate(self.node_names):
            details = (
                tuple(
                    ScoreDetail(
                        name=score,
                        raw=self.raw[k][i],
                        normalized=self.normalized[k][i],
                        weight=self.weights[k],
                        weighted=self.normalized[k][i] * self.weights[k],
                    )
                    for k, score in enumerate(self.score_names)
                )
                if self.scored and self.applies
                else ()
            )
            rows.append(
                NodeResult(
                    node=name,
                    passed=self.passed[i],
                    failed_rule=self.failed_rule[i],
                    message=self.messages[i],
                    unresolvable=self.unresolvable[i],
                    errors=tuple(self.errors.get(i, ())),
                    scores=details,
                    total=self.total[i] if self.total else 0.0,
                    extender_score=self.extender[i] if self.extender else 0,
                )
            )
        return rows

    def passing(self) -> list[str]:
        return [n for n, ok in zip(self.node_names, self.passed) if ok]

    def winners(self) -> list[str]:
        """The passing nodes with the highest total (kube-scheduler breaks such ties at random)."""
        if not self.applies or not self.scored:
            return []
        # max() and one comprehension: a third of a Python loop's time at 500 nodes (the
        # extender's shadow compares two evaluations' winners per pod, issue 25)
        best = max(compress(self.total, self.passed), default=None)
        if best is None:
            return []
        return [
            name
            for name, ok, total in zip(self.node_names, self.passed, self.total)
            if total == best and ok
        ]

    def to_dict(self) -> dict[str, Any]:
        """The policy alone over these nodes (policy-level): verdicts, scores and each passing
        node's policy rank by total. Not where the pod lands: that is kube-scheduler's pick
        (the `answer` beside it, policies/engine/placement.py)."""
        ranks = (
            competition_ranks(
                {n: t for n, t, ok in zip(self.node_names, self.total, self.passed) if ok}
            )
            if self.applies and self.scored
            else {}
        )
        out = {
            "policy": self.policy,
            "applies": self.applies,
            "reason": self.reason,
            "scored": self.scored,
            "summary": {
                "nodes": self.size,
                "passing": sum(self.passed),
                "rejected": self.size - sum(self.passed),
                "errors": sum(len(v) for v in self.errors.values()),
            },
            "nodes": [{**r.to_dict(), "policyRank": ranks.get(r.node)} for r in self.rows()],
        }
        if self.stopped is not None:
            out["stopped"] = self.stopped
        return out
