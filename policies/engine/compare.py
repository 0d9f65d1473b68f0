"""What changes between the published version and a draft for one pod, as the cluster would see
it (kube-scheduler's pick, its feasible set and the reasons it gives), and between two
documents' rules (the version diff)."""

from __future__ import annotations

from typing import Any

import yaml

from .placement import NodePlacement, Placement, competition_ranks
from .results import Evaluation


def ranks(ev: Evaluation) -> dict[str, int]:
    """The policy's own rank of each node it passes, by its total over the nodes evaluated
    (competition ranks: 1, 1, 3)."""
    if not ev.scored or not ev.applies:
        return {}
    return competition_ranks({n: t for n, t, ok in zip(ev.node_names, ev.total, ev.passed) if ok})


def _verdict(n: NodePlacement | None) -> dict[str, Any]:
    if n is None:
        return {"verdict": None, "by": None, "final": None}
    return {
        "verdict": "pass" if n.feasible else "reject",
        "by": n.plugin or n.rule,
        "final": n.final,
    }


def _names(pick: tuple[str, ...] | list[str]) -> str:
    return ", ".join(pick) if pick else "nowhere (unschedulable)"


def compare_placements(before: Placement, after: Placement) -> dict[str, Any]:
    """What would change in the cluster for one pod, published (`before`) -> draft (`after`):
    the pick (its tie group), the feasible set, the reasons kube-scheduler gives, and the nodes
    whose verdict, rejecting plugin or rule, or final total changes (with their final ranks
    before and after). A node that only moves in rank because others changed is not a change;
    the policy's own ranking is not compared (it decides nothing by itself).

    `moves` is whether the pod's fate changes (pick, feasible set or reasons); `summary` says
    it in one sentence."""
    ranks_before, ranks_after = before.final_ranks(), after.final_ranks()
    changes = []
    for n in after.nodes:
        old, new = _verdict(before.node(n.node)), _verdict(n)
        if old["verdict"] is None:
            continue  # not in the published run's snapshot (never happens for one snapshot)
        # final totals are integers (kube-scheduler's int64 sums): equal means equal
        if old == new:
            continue
        changes.append(
            {
                "node": n.node,
                "before": {**old, "rank": ranks_before.get(n.node)},
                "after": {**new, "rank": ranks_after.get(n.node)},
                "verdictChanged": old["verdict"] != new["verdict"] or old["by"] != new["by"],
            }
        )
    feasible_before, feasible_after = set(before.feasible()), set(after.feasible())
    reasons_before, reasons_after = before.reasons(), after.reasons()
    pick_changed = set(before.pick) != set(after.pick)
    reasons_changed = reasons_before != reasons_after
    feasible_changed = feasible_before != feasible_after
    moves = pick_changed or feasible_changed or reasons_changed
    if not moves:
        summary = (
            f"No change in the cluster: kube-scheduler picks {_names(after.pick)} either way"
            + (
                f", from the same {len(feasible_after)} feasible nodes"
                if after.pick
                else ", for the same reasons"
            )
            + (
                f" ({len(changes)} node{'s' if len(changes) != 1 else ''}' final totals change)"
                if changes
                else ""
            )
            + "."
        )
    else:
        parts = []
        if pick_changed:
            parts.append(f"the pick moves from {_names(before.pick)} to {_names(after.pick)}")
        else:
            parts.append(f"the pick stays {_names(after.pick)}")
        if feasible_changed:
            parts.append(f"feasible nodes {len(feasible_before)} -> {len(feasible_after)}")
        if reasons_changed:
            parts.append("the reasons change")
        text = "; ".join(parts)
        summary = text[0].upper() + text[1:] + "."
    return {
        "moves": moves,
        "summary": summary,
        "pickBefore": list(before.pick),
        "pickAfter": list(after.pick),
        "pickChanged": pick_changed,
        "appliesBefore": before.applies,
        "appliesAfter": after.applies,
        "feasibleBefore": len(feasible_before),
        "feasibleAfter": len(feasible_after),
        "feasibleAdded": sorted(feasible_after - feasible_before),
        "feasibleRemoved": sorted(feasible_before - feasible_after),
        "reasonsBefore": reasons_before,
        "reasonsAfter": reasons_after,
        "reasonsChanged": reasons_changed,
        "verdictChanges": sum(1 for c in changes if c["verdictChanged"]),
        "changes": changes,
    }


def _rules_of(document: str) -> dict[str, Any]:
    """Rules by "<section>/<name>" plus the scalar settings, for a rule-level diff."""
    try:
        data = yaml.safe_load(document) or {}
    except yaml.YAMLError:
        return {}
    if not isinstance(data, dict):
        return {}
    rules: dict[str, Any] = {}
    for key in ("matchConditions", "variables", "filters", "scores"):
        items = data.get(key)
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and "name" in item:
                rules[f"{key}/{item['name']}"] = item
    # the settings beside the rules; queue: and gang: change every pod's priority and grouping
    for key in ("schedulerNames", "failurePolicy", "queue", "gang"):
        if key in data:
            rules[key] = data[key]
    return rules


def rule_changes(old: str, new: str) -> dict[str, list[str]]:
    """Which rules `new` adds, removes or changes against `old` (names, sorted)."""
    before, after = _rules_of(old), _rules_of(new)
    return {
        "added": sorted(set(after) - set(before)),
        "removed": sorted(set(before) - set(after)),
        "changed": sorted(k for k in set(before) & set(after) if before[k] != after[k]),
    }
