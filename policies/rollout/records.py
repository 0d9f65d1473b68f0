"""Decision records' bounds, and shadow judgements as the decisions store keeps them (issue
25): what of a queued record is kept, each part bounded like a decision's, and the tallies of
every judgement (services.decisions_store imports these)."""

from __future__ import annotations

from typing import Any

# A stored decision is bounded whatever the request carried: the first DECISION_MAX_NODES nodes
# (in the scheduler's order; the record says how many more there were) and messages cut at
# DECISION_MAX_MESSAGE characters. 500 nodes x about 300 bytes = about 150 KB at most.
DECISION_MAX_NODES = 500
DECISION_MAX_MESSAGE = 300


def decision_nodes(nodes: list[Any]) -> dict[str, Any]:
    kept = []
    for entry in nodes[:DECISION_MAX_NODES]:
        if isinstance(entry.get("msg"), str) and len(entry["msg"]) > DECISION_MAX_MESSAGE:
            entry = {**entry, "msg": entry["msg"][:DECISION_MAX_MESSAGE] + "..."}
        kept.append(entry)
    return {
        "nodes": kept,
        **({"truncated": len(nodes) - len(kept)} if len(nodes) > len(kept) else {}),
    }


SHADOW_OUTCOMES = frozenset({"same", "nodes", "moved", "rejected", "error", "skipped"})
_SHADOW_DIFFERENCE_LISTS = ("rejects", "admits", "activeTop", "shadowTop")


def shadow_fields(item: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(role, shadow outcome, the `shadow` entry of `nodes`) of a queued record: a shadow
    judgement (issue 25) keeps the active version's number, the candidate count, its evaluation
    time, its error, the difference and the active version's breakdown, each bounded; any other
    record is the active version's."""
    if item.get("role") != "shadow":
        return "active", "", {}
    outcome = item.get("outcome")
    value = item.get("shadow")
    if outcome not in SHADOW_OUTCOMES or not isinstance(value, dict):
        raise ValueError("a shadow record without a known outcome")
    kept: dict[str, Any] = {
        "activeVersion": int(value["activeVersion"]),
        "candidates": int(value.get("candidates", 0)),
        "evalMs": round(float(value.get("evalMs", 0.0)), 3),
    }
    if isinstance(value.get("error"), str):
        kept["error"] = value["error"][:DECISION_MAX_MESSAGE]
    difference = value.get("difference")
    if isinstance(difference, dict):
        kept["difference"] = {
            **{
                key: [str(n)[:253] for n in difference.get(key, [])[:DECISION_MAX_NODES]]
                for key in _SHADOW_DIFFERENCE_LISTS
                if isinstance(difference.get(key), list)
            },
            **{
                key: int(difference.get(key, 0))
                for key in ("rejectsCount", "admitsCount", "errors")
            },
            "noFeasible": difference.get("noFeasible") is True,
            "preferred": difference.get("preferred") is True,
        }
    active = value.get("active")
    if isinstance(active, dict) and isinstance(active.get("nodes"), list):
        if not all(isinstance(n, dict) for n in active["nodes"]):
            raise TypeError("an active node entry is not an object")
        kept["active"] = {
            "scores": list(active.get("scores", []))[:64],
            "weights": list(active.get("weights", []))[:64],
            "winners": list(active.get("winners", []))[:64],
            **decision_nodes(active["nodes"]),
        }
    return "shadow", outcome, {"shadow": kept}


def shadow_tally_row(item: dict[str, Any]):
    """The ShadowTally row of a queued `shadow-tally` record (policies/extender/shadow.py:
    ShadowTallies.take), or ValueError/TypeError/KeyError for a malformed one. Counts of known
    outcomes only, each a whole number from 0 to 10**9."""
    from datetime import UTC, datetime

    from policies.models import ShadowTally

    counts = item["counts"]
    if not isinstance(counts, dict) or not isinstance(item["policy"], str):
        raise TypeError("a tally without counts or policy")
    kept = {}
    for outcome, n in counts.items():
        if outcome not in SHADOW_OUTCOMES or type(n) is not int or not 0 <= n <= 10**9:
            raise ValueError(f"a tally's count {str(outcome)[:20]!r} is not a known outcome's")
        kept[outcome] = n
    return ShadowTally(
        created_at=datetime.fromtimestamp(float(item["at"]), tz=UTC),
        policy_name=item["policy"][:63],
        policy_version=int(item["version"]),
        active_version=int(item["activeVersion"]),
        **kept,
    )
