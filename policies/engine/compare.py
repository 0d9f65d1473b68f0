"""What changes between two evaluations of the same pod over the same nodes (draft vs published),
and between two documents' rules (the version diff)."""

from __future__ import annotations

from typing import Any

import yaml

from .results import Evaluation

# Totals are compared at this many decimals: equal totals computed along different float paths
# (e.g. 0.1 + 0.2 vs 0.3) are one tie, as the table shows them.
TOTAL_PLACES = 6


def ranks(ev: Evaluation) -> dict[str, int]:
    """1-based competition rank of each passing node by total: equal totals share a rank and the
    next one skips (1, 1, 3), in the comparison and in every table alike."""
    if not ev.scored:
        return {}
    order = sorted(
        (round(t, TOTAL_PLACES) for t, ok in zip(ev.total, ev.passed) if ok), reverse=True
    )
    rank_of_total: dict[float, int] = {}
    for position, total in enumerate(order, start=1):
        rank_of_total.setdefault(total, position)
    return {
        n: rank_of_total[round(t, TOTAL_PLACES)]
        for n, t, ok in zip(ev.node_names, ev.total, ev.passed)
        if ok
    }


def compare_evaluations(before: Evaluation, after: Evaluation) -> dict[str, Any]:
    """Nodes whose verdict or total differ (with their ranks before and after), and whether the
    winner changes. A node that only moves because others changed is not a change: its rank
    follows from theirs."""
    ranks_before, ranks_after = ranks(before), ranks(after)
    index_before = {n: i for i, n in enumerate(before.node_names)}
    changes = []
    for i, name in enumerate(after.node_names):
        j = index_before.get(name)
        if j is None:
            continue
        old = {
            "verdict": "pass" if before.passed[j] else "reject",
            "rank": ranks_before.get(name),
            "total": round(before.total[j], 4) if before.total else 0.0,
            "extenderScore": before.extender[j] if before.extender else 0,
            "failedRule": before.failed_rule[j],
        }
        new = {
            "verdict": "pass" if after.passed[i] else "reject",
            "rank": ranks_after.get(name),
            "total": round(after.total[i], 4) if after.total else 0.0,
            "extenderScore": after.extender[i] if after.extender else 0,
            "failedRule": after.failed_rule[i],
        }
        total_changed = old["verdict"] == new["verdict"] == "pass" and round(
            before.total[j] if before.total else 0.0, TOTAL_PLACES
        ) != round(after.total[i] if after.total else 0.0, TOTAL_PLACES)
        if old["verdict"] != new["verdict"] or total_changed:
            changes.append(
                {
                    "node": name,
                    "before": old,
                    "after": new,
                    "verdictChanged": old["verdict"] != new["verdict"],
                }
            )
    winners_before, winners_after = before.winners(), after.winners()
    return {
        "policyBefore": before.policy,
        "winnersBefore": winners_before,
        "winnersAfter": winners_after,
        "winnerChanged": winners_before != winners_after,
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
    for key in ("schedulerNames", "failurePolicy"):
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
