"""kube-scheduler's answer for one pod, as plain data: where it lands (the tie group of the
highest final total) or why it cannot, and per node what rejected it and its totals.

This is the product's one answer: every preview, the CLI, test cases ("lands in", "unschedulable
with these reasons", "rejected by plugin P") and "compare with published" speak of it. The
policy's own ranking (its score 0..100 and rank among the nodes it is sent) is a column of it,
never a second winner. policies/evaluation.py builds a Placement from the model of
kube-scheduler's cycle (policies/schedmodel/); the engine never imports the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

# Totals are compared at this many decimals: equal totals computed along different float paths
# (e.g. 0.1 + 0.2 vs 0.3) are one tie, as the tables show them.
TOTAL_PLACES = 6


def competition_ranks(values: dict[str, float]) -> dict[str, int]:
    """1-based rank of each key by value, highest first; equal values (at TOTAL_PLACES) share
    a rank and the next one skips (1, 1, 3)."""
    rounded = {k: round(v, TOTAL_PLACES) for k, v in values.items()}
    first: dict[float, int] = {}
    for position, value in enumerate(sorted(rounded.values(), reverse=True), start=1):
        first.setdefault(value, position)
    return {k: first[v] for k, v in rounded.items()}


class NodePlacement(NamedTuple):
    """One node in kube-scheduler's cycle. A named tuple: a preview builds one per node, and
    5000 frozen dataclasses took 1.4x as long (43 ms vs 32 ms on the loaded 2-core machine)."""

    node: str
    plugin: str | None = None  # the filter plugin that rejects it (then the policy never sees it)
    plugin_reasons: tuple[str, ...] = ()
    rule: str | None = None  # the policy's filter that rejects it (a node it was sent)
    message: str | None = None  # that filter's message
    final: int | None = None  # the final total (plugins + extender); None: not scored
    policy_total: float | None = None  # the policy's total 0..100 as the extender scored it
    policy_score: int | None = None  # what the extender answers: round(total / 10), 0..10

    @property
    def feasible(self) -> bool:
        """Passes kube-scheduler's filters and the policy's (its feasible set, extenders
        included)."""
        return self.plugin is None and self.rule is None

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why it is rejected as the FailedScheduling event counts it: the plugin's reasons, or
        the extender's "rule: message" (policies/extender/service.py sends that text)."""
        if self.plugin is not None:
            return self.plugin_reasons
        if self.rule is not None:
            return (f"{self.rule}: {self.message}" if self.message else self.rule,)
        return ()


@dataclass(frozen=True)
class Placement:
    """Where kube-scheduler puts one pod: `pick` is the tie group it picks from at random
    (empty: unschedulable), `nodes` every node of the snapshot in its order."""

    nodes: tuple[NodePlacement, ...]
    pick: tuple[str, ...]
    applies: bool = True  # the policy applies to the pod (else it passes through)
    # the names of kube-scheduler's filter plugins (given by the model): a test case's
    # rejectedBy that names one of them speaks of kube-scheduler's filters, not of a rule
    filter_plugins: tuple[str, ...] = ()
    # the FailedScheduling event's whole message for an unschedulable pod, as the model writes
    # it (policies/schedmodel/message.py, Cycle.failed_scheduling); None: not given
    failed_scheduling: str | None = None

    @property
    def scheduled(self) -> bool:
        return bool(self.pick)

    @cached_property
    def _by_name(self) -> dict[str, NodePlacement]:
        return {n.node: n for n in self.nodes}

    def node(self, name: str) -> NodePlacement | None:
        return self._by_name.get(name)

    def feasible(self) -> list[str]:
        """The nodes that pass every filter, the policy's included (the nodes scored)."""
        return [n.node for n in self.nodes if n.feasible]

    def reasons(self) -> dict[str, int]:
        """reason -> the number of nodes it rejects, most first (then by text): the counts of
        kube-scheduler's FailedScheduling message, the policy's rejections included."""
        counts: dict[str, int] = {}
        for n in self.nodes:
            for reason in n.reasons:
                counts[reason] = counts.get(reason, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def final_total(self) -> int | None:
        """The pick's final total (None: unschedulable)."""
        found = self.node(self.pick[0]) if self.pick else None
        return found.final if found is not None else None

    def final_ranks(self) -> dict[str, int]:
        """Rank of each scored node by final total (1: the pick)."""
        return competition_ranks({n.node: n.final for n in self.nodes if n.final is not None})

    def policy_ranks(self) -> dict[str, int]:
        """Rank of each node the extender scored by the policy's total (its own ranking among
        the nodes kube-scheduler sends it: a column, not the answer)."""
        return competition_ranks(
            {n.node: n.policy_total for n in self.nodes if n.policy_total is not None}
        )

    def summary(self) -> str:
        """The answer in one line: "lands on X", "lands on one of X, Y (a tie)" or
        "unschedulable: " and kube-scheduler's FailedScheduling message (the model's, whole;
        without it, "0/N nodes are available: " and the reason counts, most first)."""
        if len(self.pick) == 1:
            return f"lands on {self.pick[0]}"
        if self.pick:
            return f"lands on one of {', '.join(self.pick)} (a tie: kube-scheduler picks at random)"
        if self.failed_scheduling:
            return f"unschedulable: {self.failed_scheduling}"
        counts = ", ".join(f"{count} {reason}" for reason, count in self.reasons().items())
        return f"unschedulable: 0/{len(self.nodes)} nodes are available" + (
            f": {counts}" if counts else ""
        )

    def to_dict(self) -> dict[str, Any]:
        """The `answer` object of the REST preview, `evaluate --json` and background previews."""
        return {
            "outcome": "scheduled" if self.pick else "unschedulable",
            "pick": list(self.pick),
            "tie": len(self.pick) > 1,
            "finalTotal": self.final_total(),
            "feasible": len(self.feasible()),
            "nodes": len(self.nodes),
            "reasons": self.reasons(),
            "policyApplies": self.applies,
            "failedScheduling": None if self.pick else self.failed_scheduling,
            "summary": self.summary(),
        }
