"""The playground's preview: one pod evaluated by the editor's document over a cluster snapshot,
shaped for the result fragment (summary, node table, charts, comparison with the published
version, editor markers).

Kept lean because it runs on every pause in typing: compiled policies and parsed pods are cached
by their text, the cluster snapshot comes from its source's in-process cache, and rows are built
here as plain dicts so the template only prints them. One database read: the stored scheduler
configuration (a primary-key lookup; its parse is cached by text).
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml

from policies.cluster.loaded import LoadedCluster, pod_from_cluster
from policies.cluster.manifest import pod_view_from_text
from policies.cluster.sources import cluster_for
from policies.cluster.whatif import whatif_apply, whatif_parse
from policies.engine.document import FieldError, PolicyInvalid
from policies.engine.inputs import PodView
from policies.engine.results import Evaluation
from policies.engine.testcases import record_expectation
from policies.errors import ClusterUnavailable, EvaluationTooSlow, InputError
from policies.evaluation import (
    Preview,
    example_pod_views,
    policy_compile,
    preview_run,
    profile_active,
    queue_preview_run,
    request_guard,
    weight_advise_run,
)
from policies.formatting import number_format, quantity_format
from policies.schedmodel.advisor import weight_advise
from policies.schedmodel.pipeline import SCORE_PLUGINS

from .forms import PodChoice
from .markers import error_markers, evaluation_markers
from .node_rows import node_drills_html, node_rows_html

MAX_ROWS = 1000  # node rows rendered; bigger clusters show the best passing nodes first
MAX_DRILLS = 200  # rows with a drill-down (variables are evaluated again per node)
TOP_BARS = 8


# --- inputs, cached by text ----------------------------------------------------------------


@functools.lru_cache(maxsize=16)
def _pod_from_text(text: str) -> PodView:
    return pod_view_from_text(text)


def pod_resolve(*, choice: PodChoice, cluster: LoadedCluster) -> PodView:
    """The engine's view of the chosen pod; InputError when it cannot be found or read."""
    if choice.kind == "snapshot":
        return pod_from_cluster(cluster=cluster, namespace=choice.namespace, name=choice.name)
    return _pod_from_text(choice.text)


def pod_manifest(*, choice: PodChoice, pod: PodView) -> str:
    """The pod as manifest text for a test case: the file or pasted text as given, or the
    snapshot's object without status and server-set fields (and unbound: no nodeName)."""
    if choice.kind != "snapshot":
        return choice.text
    obj = pod["object"]
    if "spec" not in obj:
        raise InputError(
            f"the snapshot keeps only the metadata of pod {pod['namespace']}/{pod['name']}; "
            "paste its manifest to make a test case of it"
        )
    meta = {
        k: v
        for k, v in (obj.get("metadata") or {}).items()
        if k in ("name", "namespace", "labels", "annotations", "ownerReferences")
    }
    spec = {k: v for k, v in obj["spec"].items() if k != "nodeName"}
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    return yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False)


def test_expectation(*, evaluation: Evaluation) -> dict[str, Any]:
    """What the preview shows, as a test case's `expect` (the engine's record_expectation)."""
    return record_expectation(evaluation)


# --- the pod ---------------------------------------------------------------------------------


def pod_summary(*, pod: PodView) -> dict[str, Any]:
    """The pod line above the table: who it is and what it asks for."""
    requests = [quantity_format(resource=k, value=v) for k, v in pod["requests"].items() if v]
    return {
        "ref": f"{pod['namespace']}/{pod['name']}",
        "scheduler": pod["schedulerName"],
        "requests": ", ".join(requests) or "no requests",
        "node": pod["nodeName"],
        "phase": pod["phase"],
    }


# --- the result ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreviewInput:
    """What one preview evaluates."""

    document: str
    pod: PodChoice
    cluster_key: str = ""
    compare_document: str | None = None  # the active version's document, in compare mode
    compare_label: str = ""  # "v3"
    what_if: str = ""  # what-if edits (policies/cluster/whatif.py), for this preview only


PLUGIN_LABELS = {  # short column heads for the score plugins
    "TaintToleration": "Taint",
    "NodeAffinity": "Affinity",
    "NodeResourcesFit": "Fit",
    "PodTopologySpread": "Spread",
    "InterPodAffinity": "PodAff.",
    "NodeResourcesBalancedAllocation": "Balanced",
    "ImageLocality": "Image",
}


def _competition_ranks(totals: dict[str, int]) -> dict[str, int]:
    """Equal totals share a rank (1, 1, 3), as the comparison ranks them."""
    ordered = sorted(totals.values(), reverse=True)
    first = {}
    for i, value in enumerate(ordered):
        first.setdefault(value, i + 1)
    return {name: first[value] for name, value in totals.items()}


def _policy_cells(evaluation: Evaluation, i: int, sent: bool) -> dict[str, Any]:
    """The policy's verdict, failing rule and rule scores on node i of `evaluation`; `sent`:
    kube-scheduler sends the node to the extender (otherwise only the verdict is shown)."""
    ok = evaluation.passed[i]
    scored = sent and ok and evaluation.applies and evaluation.scored
    scores = []
    if evaluation.applies and evaluation.scored:
        for k, weight in enumerate(evaluation.weights):
            raw = evaluation.raw[k][i]
            norm = evaluation.normalized[k][i]
            scores.append(
                {
                    "name": evaluation.score_names[k],
                    "weight": weight,
                    "raw": number_format(raw, places=2),
                    "norm": number_format(norm, places=1),
                    "weighted": number_format(norm * weight, places=1),
                    "sort": round(norm * weight, 4) if scored else "",
                    "pct": max(0.0, min(100.0, norm)) if scored else 0,
                    "missing": raw is None,
                    "shown": scored,
                }
            )
    errors = evaluation.errors.get(i, ())
    return {
        "passed": ok,
        "sent": sent,
        "rule": evaluation.failed_rule[i] or "",
        "message": evaluation.messages[i] or "",
        "unresolvable": evaluation.unresolvable[i],
        "errors": "; ".join(f"{e.rule}: {e.message}" for e in errors),
        "error_count": len(errors),
        "scores": scores,
        "total": number_format(evaluation.total[i], places=2) if scored else "—",
        "total_value": evaluation.total[i] if scored else None,
        "total_sort": round(evaluation.total[i], 4) if scored else "",
        "ext": evaluation.extender[i] if scored else "—",
    }


def _rows(
    preview: Preview, changes: dict[str, dict[str, Any]] | None
) -> tuple[list[dict[str, Any]], int]:
    """Table rows in kube-scheduler's order: scored nodes by final total (the pick first), then
    nodes the policy rejected, then nodes kube-scheduler's own filters rejected.

    The policy columns of a node kube-scheduler sends to the extender come from the cycle's
    evaluation (minmax over the nodes sent, as the extender answers); a node its filters reject
    is never sent, so only the policy's verdict over the whole snapshot is shown for it."""
    cycle, full = preview.cycle, preview.evaluation
    profile = cycle.profile
    in_cycle = {n: i for i, n in enumerate(cycle.evaluation.node_names)} if cycle.evaluation else {}
    in_full = {n: i for i, n in enumerate(full.node_names)}
    pick = set(cycle.pick)
    finals = {o.node: o.total for o in cycle.outcomes if o.total is not None}
    rank_of = _competition_ranks(finals)
    order = sorted(
        cycle.outcomes,
        key=lambda o: (
            (0, -o.total, o.node)
            if o.total is not None
            else (1, o.policy_rule or "", o.node)
            if o.feasible
            else (2, o.plugin or "", o.node)
        ),
    )
    shown = order[:MAX_ROWS]
    rows = []
    for o in shown:
        if o.node in in_cycle:
            policy = _policy_cells(cycle.evaluation, in_cycle[o.node], True)
        else:
            policy = _policy_cells(full, in_full[o.node], o.feasible)
        plugins = []
        bar = []
        if o.total is not None:
            for name, score in o.scores.items():
                weight = profile.score_weight(name)
                plugins.append(
                    {"name": name, "score": score, "weight": weight, "weighted": score * weight}
                )
                if score * weight:
                    bar.append({"name": name, "value": score * weight})
            if o.extender:
                bar.append({"name": "policy", "value": o.extender})
            for seg in bar:
                seg["pct"] = round(seg["value"] * 100 / o.total, 2) if o.total else 0
        rows.append(
            {
                "node": o.node,
                "rank": rank_of.get(o.node, ""),
                "winner": o.node in pick,
                "ks_passed": o.feasible,
                "ks_plugin": o.plugin or "",
                "ks_reason": "; ".join(o.reasons),
                "policy": policy,
                "plugins": plugins,
                "ext_score": o.extender_score,
                "ext_weight": profile.extender_weight,
                "extender": o.extender if o.total is not None else "—",
                "final": o.total if o.total is not None else "—",
                "final_sort": o.total if o.total is not None else "",
                "bar": bar,
                "change": changes.get(o.node) if changes else None,
            }
        )
    return rows, len(order) - len(shown)


def _drills(
    preview: Preview, rows: list[dict[str, Any]], limit: int = MAX_DRILLS
) -> list[dict[str, Any]]:
    """The drill-down of the first `limit` rows: the node's labels, taints, allocatable and
    requested, every plugin's and rule's arithmetic and the policy's variable values."""
    by_name = {n["name"]: n for n in preview.cluster.nodes()}
    out = []
    for row in rows[:limit]:
        node = by_name[row["node"]]
        variables = []
        if preview.compiled.variables and preview.evaluation.applies:
            values = preview.compiled.variable_values(preview.pod, node, preview.cluster.state)
            for name, value in values.items():
                variables.append({"name": name, "value": _value_text(value)})
        resources = [
            {
                "name": name,
                "allocatable": quantity_format(resource=name, value=node["allocatable"][name]),
                "requested": quantity_format(resource=name, value=node["requested"].get(name, 0)),
                "pod": quantity_format(resource=name, value=preview.pod["requests"].get(name, 0)),
            }
            for name in node["allocatable"]
            if node["allocatable"][name] or node["requested"].get(name)
        ]
        out.append(
            {
                "row": row,
                "labels": sorted(node["labels"].items()),
                "taints": [
                    f"{t.get('key', '')}={t.get('value', '')}:{t.get('effect', '')}"
                    for t in node["taints"]
                ],
                "unschedulable": node["unschedulable"],
                "pods": node["podCount"],
                "resources": resources,
                "variables": variables,
            }
        )
    return out


def _advice(preview: Preview, document: str) -> dict[str, Any]:
    """The weight advisor for this pod and for the example pods: the smallest extender weight
    at which the policy's preferred node is kube-scheduler's pick (about 1 ms per pod on the
    demo cluster, so it runs with every preview)."""
    pod = weight_advise(preview.cycle)
    examples = weight_advise_run(
        document=document,
        pods=example_pod_views(),
        cluster=preview.cluster,
        profile=preview.cycle.profile,
    )
    current = preview.cycle.profile.extender_weight
    return {
        "pod": pod.weight,
        "reason": pod.reason,
        "preferred": ", ".join(pod.preferred[:3]) + (" …" if len(pod.preferred) > 3 else ""),
        "examples": examples.weight,
        "current": current,
        "outvoted": max(pod.weight or 0, examples.weight or 0) > current,
    }


def _value_text(value: Any) -> str:
    if isinstance(value, Exception):
        return f"error: {value}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number_format(value, places=4)
    return str(value)


def _histogram(evaluation: Evaluation) -> tuple[list[dict[str, Any]], int]:
    """Passing nodes per extender score 0..10 (what kube-scheduler receives)."""
    counts = [0] * 11
    for ok, score in zip(evaluation.passed, evaluation.extender):
        if ok:
            counts[max(0, min(10, score))] += 1
    bars = [
        {"label": str(s), "value": n, "kind": "pass" if n else ""} for s, n in enumerate(counts)
    ]
    return bars, max(counts) or 1


def _top(evaluation: Evaluation) -> list[dict[str, Any]]:
    """The best passing nodes by total (0..100), for the second chart."""
    best = sorted(
        (i for i in range(evaluation.size) if evaluation.passed[i]),
        key=lambda i: (-evaluation.total[i], evaluation.node_names[i]),
    )[:TOP_BARS]
    return [
        {
            "label": evaluation.node_names[i],
            "value": number_format(evaluation.total[i], places=1),
            "pct": evaluation.total[i],
        }
        for i in best
    ]


def _compare(
    before: Evaluation, after: Evaluation, result: dict[str, Any], label: str
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The comparison banner and changed-node table, and changes by node for the main table
    (`result` is compare_evaluations(before, after))."""
    changes = []
    by_node = {}
    for c in result["changes"]:
        b, a = c["before"], c["after"]
        row = {
            "node": c["node"],
            "verdict_changed": c["verdictChanged"],
            "before_verdict": b["verdict"],
            "after_verdict": a["verdict"],
            "before_rank": b["rank"] or "—",
            "after_rank": a["rank"] or "—",
            "before_total": number_format(b["total"], places=2) if b["verdict"] == "pass" else "—",
            "after_total": number_format(a["total"], places=2) if a["verdict"] == "pass" else "—",
            "before_ext": b["extenderScore"] if b["verdict"] == "pass" else "—",
            "after_ext": a["extenderScore"] if a["verdict"] == "pass" else "—",
            "before_rule": b["failedRule"] or "",
            "after_rule": a["failedRule"] or "",
            # rank movement: a positive number means the node moved up (to a better rank)
            "moved": (b["rank"] - a["rank"]) if b["rank"] and a["rank"] else 0,
        }
        changes.append(row)
        by_node[c["node"]] = row
    changes.sort(key=lambda r: (not r["verdict_changed"], -abs(r["moved"]), r["node"]))
    return (
        {
            "label": label,
            "winner_changed": result["winnerChanged"],
            "winners_before": result["winnersBefore"],
            "winners_after": result["winnersAfter"],
            "applies_before": before.applies,
            "applies_after": after.applies,
            "reason_before": before.reason,
            "verdict_changes": result["verdictChanges"],
            "rank_changes": sum(1 for r in changes if r["moved"]),
            "changes": changes,
        },
        by_node,
    )


def _problem_dicts(errors: list[FieldError]) -> list[dict[str, Any]]:
    return [
        {
            "path": e.path or "document",
            "message": e.message,
            "kind": e.kind,
            "where": f"line {e.doc_line}" + (f", column {e.doc_column}" if e.doc_column else "")
            if e.doc_line
            else "",
        }
        for e in errors
    ]


def preview_build(*, given: PreviewInput) -> dict[str, Any]:
    """Everything the result fragment shows. `state` is ok | invalid (the document has
    errors: markers and a list, the table keeps its last good result) | unavailable (the pod
    or the cluster cannot be read: a message)."""
    started = time.perf_counter()
    try:
        with request_guard():
            policy_compile(given.document)
    except PolicyInvalid as exc:
        markers, _ = error_markers(text=given.document, errors=exc.errors)
        return {"state": "invalid", "problems": _problem_dicts(exc.errors), "markers": markers}
    except EvaluationTooSlow as exc:
        return {"state": "unavailable", "message": str(exc), "markers": []}
    try:
        cluster = cluster_for(key=given.cluster_key)
        pod = pod_resolve(choice=given.pod, cluster=cluster)
        cluster, pod, what_if = whatif_apply(
            cluster=cluster, pod=pod, edits=whatif_parse(given.what_if)
        )
    except (InputError, ClusterUnavailable) as exc:
        return {"state": "unavailable", "message": str(exc), "markers": []}
    try:
        with request_guard():  # no preview holds the worker past SCHEDWEB_PREVIEW_SECONDS
            preview = preview_run(
                document=given.document,
                pod=pod,
                cluster=cluster,
                compare_document=given.compare_document,
                profile=profile_active(scheduler_name=pod["schedulerName"]),
            )
    except EvaluationTooSlow as exc:
        return {"state": "unavailable", "message": str(exc), "markers": []}
    compiled, evaluation = preview.compiled, preview.evaluation
    compare, changes = None, None
    if preview.compare_error is not None:  # an old version the engine no longer accepts
        compare = {"label": given.compare_label, "error": str(preview.compare_error)}
    elif preview.before is not None:
        compare, changes = _compare(
            preview.before, evaluation, preview.comparison, given.compare_label
        )
    rows, hidden = _rows(preview, changes)
    drills = _drills(preview, rows)
    histogram, hist_max = _histogram(evaluation)
    passing = sum(evaluation.passed)
    winners = evaluation.winners()
    winner_index = evaluation.node_names.index(winners[0]) if winners else None
    reasons = Counter(r for r, ok in zip(evaluation.failed_rule, evaluation.passed) if not ok)
    cycle = preview.cycle
    by_node = {o.node: o for o in cycle.outcomes}
    in_tree = Counter(o.plugin for o in cycle.outcomes if o.plugin)
    plugin_columns = [
        {"name": name, "label": PLUGIN_LABELS.get(name, name), "weight": weight}
        for name in SCORE_PLUGINS
        if (weight := cycle.profile.score_weight(name))
    ]
    advice = _advice(preview, given.document)
    queue = _queue(compiled, pod, cluster, given.document)
    elapsed_ms = (time.perf_counter() - started) * 1000
    return {
        "state": "ok",
        "markers": evaluation_markers(
            text=given.document, spec=compiled.spec, evaluation=evaluation
        ),
        "policy": compiled.name,
        "applies": evaluation.applies,
        "reason": evaluation.reason,
        "scored": evaluation.applies and evaluation.scored,
        "nodes": evaluation.size,
        "passing": passing,
        "rejected": evaluation.size - passing,
        "errors": sum(len(v) for v in evaluation.errors.values()),
        "error_nodes": len(evaluation.errors),
        "winners": winners,
        "winner_total": number_format(evaluation.total[winner_index], places=2) if winners else "",
        "winner_ext": evaluation.extender[winner_index] if winners else "",
        "reasons": reasons.most_common(3),
        "pick": cycle.pick,
        "pick_total": by_node[cycle.pick[0]].total if cycle.pick else "",
        "feasible": len(cycle.feasible()),
        "in_tree_reasons": in_tree.most_common(3),
        "extender_weight": cycle.profile.extender_weight,
        "strategy": cycle.profile.strategy,
        "caveats": cycle.caveats,
        "admitted": cycle.admitted,
        "skipped_plugins": cycle.skipped,
        "failed_scheduling": cycle.failed_scheduling(),
        "advice": advice,
        "queue": queue,
        "plugin_columns": plugin_columns,
        "score_columns": [
            {"name": name, "weight": weight, "normalize": rule.normalize}
            for name, weight, rule in zip(
                evaluation.score_names, evaluation.weights, compiled.spec.scores
            )
        ],
        "rows": rows,
        "rows_html": node_rows_html(
            rows=rows,
            plugins=[c["name"] for c in plugin_columns],
            compare_label=given.compare_label,
        ),
        "drills_html": node_drills_html(drills=drills),
        "hidden_rows": hidden,
        "histogram": histogram,
        "hist_max": hist_max,
        "top": _top(evaluation),
        "compare": compare,
        "pod": pod_summary(pod=pod),
        "cluster": cluster_info(cluster=cluster),
        "what_if": what_if,
        "elapsed_ms": round(elapsed_ms, 1),
    }


QUEUE_PANEL_ROWS = 20


def _queue(compiled, pod: PodView, cluster: LoadedCluster, document: str) -> dict[str, Any] | None:
    """The queue panel (a document with `queue:` only): this pod's key and the first pending
    pods of the policy's schedulerNames in the order kube-scheduler's queue would take them."""
    spec = compiled.spec.queue
    if spec is None:
        return None
    try:
        with request_guard():
            order = queue_preview_run(document=document, cluster=cluster)
    except EvaluationTooSlow as exc:
        return {"error": str(exc)}
    labels = cluster.state.namespaces().get(pod["namespace"])
    return {
        "expression": spec.expression,
        "min": spec.min,
        "max": spec.max,
        "pod": compiled.queue_key(pod, labels, cluster.state),
        "rows": [
            {"ref": f"{p['namespace']}/{p['name']}", "priority": p.get("priority") or 0, "key": k}
            for p, k in order.rows[:QUEUE_PANEL_ROWS]
        ],
        "total": order.total,
    }


def cluster_info(*, cluster: LoadedCluster) -> dict[str, Any]:
    """The cluster source indicator: which source, how old, stale or not and why."""
    return {
        "source": cluster.source,
        "label": cluster.describe(),
        "version": cluster.version,
        "age": round(cluster.age_seconds) if cluster.age_seconds is not None else None,
        "updated_at": cluster.updated_at,
        "updated_iso": datetime.fromtimestamp(cluster.updated_at, tz=UTC).isoformat()
        if cluster.updated_at
        else "",
        "stale": cluster.stale,
        "status": cluster.status,
        "error": cluster.error,
        "nodes": cluster.state.node_count(),
    }
