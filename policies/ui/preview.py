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
from policies.engine.placement import Placement
from policies.engine.results import Evaluation
from policies.engine.testcases import DEFAULT_PINS, record_expectation
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
from .reference import section_for

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


def test_expectation(*, preview: Preview, pins: tuple[str, ...] | None = None) -> dict[str, Any]:
    """What the preview shows, as a test case's `expect`: only what `pins` names (the
    engine's record_expectation; default: kube-scheduler's pick and the nodes the policy
    rejects), never every node's verdict."""
    return record_expectation(preview.evaluation, preview.placement, pins)


def test_pin_choices(*, preview: Preview) -> list[dict[str, Any]]:
    """The choices "Add as test case" offers: what each pin would state about this pod, and
    whether it is ticked by default (DEFAULT_PINS; `applies` when the pod passes through)."""
    placement, evaluation = preview.placement, preview.evaluation
    policy_rejects = sum(1 for n in placement.nodes if n.rule)
    plugin_rejects = sum(1 for n in placement.nodes if n.plugin)
    tied = placement.pick
    if len(tied) > 3:
        pick = f"lands in one of {len(tied)} tied nodes ({', '.join(tied[:3])}, …)"
    elif tied:
        pick = f"lands in {', '.join(tied)}" + (" (a tie)" if len(tied) > 1 else "")
    else:
        pick = f"unschedulable, with its {len(placement.reasons())} reason(s)"
    choices = [
        ("pick", pick, True),
        (
            "policyRejects",
            f"the {policy_rejects} node(s) the policy rejects, by rule",
            policy_rejects > 0,
        ),
        (
            "pluginRejects",
            f"the {plugin_rejects} node(s) kube-scheduler's filters reject, by plugin",
            plugin_rejects > 0,
        ),
        (
            "applies",
            "the policy applies" if evaluation.applies else "the pod passes through the policy",
            True,
        ),
    ]
    defaults = DEFAULT_PINS if evaluation.applies else (*DEFAULT_PINS, "applies")
    return [
        {
            "value": value,
            "label": label,
            "checked": available and value in defaults,
            "available": available,
        }
        for value, label, available in choices
    ]


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
    evaluation (minmax over the nodes sent, as the extender answers), with the policy's rank
    among them; a node its filters reject is never sent, so only the policy's verdict over
    the whole snapshot is shown for it (the drill-down has its policy-level arithmetic)."""
    cycle, full, placement = preview.cycle, preview.evaluation, preview.placement
    profile = cycle.profile
    in_cycle = {n: i for i, n in enumerate(cycle.evaluation.node_names)} if cycle.evaluation else {}
    in_full = {n: i for i, n in enumerate(full.node_names)}
    pick = set(cycle.pick)
    rank_of = placement.final_ranks()
    policy_rank = placement.policy_ranks()
    top = max((o.total for o in cycle.outcomes if o.total is not None), default=0) or 1
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
        plugin_sum = 0
        if o.total is not None:
            for name, score in o.scores.items():
                weight = profile.score_weight(name)
                weighted = (score or 0) * weight  # a plugin PreScore skips adds nothing
                plugins.append(
                    {"name": name, "score": score, "weight": weight, "weighted": weighted}
                )
                plugin_sum += weighted
            # kube-scheduler's share vs the policy's, each as a part of the best final total
            # (so bars compare across rows): 486 + 100 of 586 -> 82.94% and 17.06%
            bar = [
                {"name": "kube-scheduler", "value": plugin_sum},
                {"name": "policy", "value": o.extender},
            ]
            for seg in bar:
                seg["pct"] = round(seg["value"] * 100 / top, 2)
        rows.append(
            {
                "node": o.node,
                "rank": rank_of.get(o.node, ""),
                "pick": o.node in pick,
                "ks_passed": o.feasible,
                "ks_plugin": o.plugin or "",
                "ks_reason": "; ".join(o.reasons),
                "policy": policy,
                "policy_rank": policy_rank.get(o.node, ""),
                "plugins": plugins,
                "plugin_sum": plugin_sum if o.total is not None else "—",
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
    requested, every plugin's and rule's arithmetic and the policy's variable values. For a
    node kube-scheduler never sends the policy, its rules are shown over every node
    (policy-level), said so."""
    by_name = {n["name"]: n for n in preview.cluster.nodes()}
    full = preview.evaluation
    in_full = {n: i for i, n in enumerate(full.node_names)}
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
                "allocatable": _amount(name, node["allocatable"][name]),
                "requested": _amount(name, node["requested"].get(name, 0)),
                "pod": _amount(name, preview.pod["requests"].get(name, 0)),
            }
            for name in node["allocatable"]
            if node["allocatable"][name] or node["requested"].get(name)
        ]
        # not sent: the policy's own arithmetic over every node, to explain its verdict
        overall = None
        if not row["policy"]["sent"]:
            overall = _policy_cells(full, in_full[row["node"]], True)
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
                "applies": full.applies,
                "reason": full.reason,
                "scored": full.applies and full.scored,
                "overall": overall,
            }
        )
    return out


def _amount(resource: str, value: int) -> str:
    """A quantity without the resource's name (the row names it): "87.1 GiB", not "87.1 GiB
    ephemeral-storage", so the drill-down's table fits a phone."""
    text = quantity_format(resource=resource, value=value)
    for unit in (resource.replace("_", "-"), resource):
        text = text.removesuffix(f" {unit}")
    return text


def _advice(preview: Preview, document: str) -> dict[str, Any]:
    """The weight advisor for this pod and for the example pods: the smallest extender weight
    at which kube-scheduler picks a node the policy scores highest (its rank 1; about 1 ms per
    pod on the demo cluster, so it runs with every preview)."""
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
        "top": ", ".join(pod.preferred[:3]) + (" …" if len(pod.preferred) > 3 else ""),
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


def _histogram(cycle_evaluation: Evaluation | None) -> tuple[list[dict[str, Any]], int]:
    """Nodes per policy score 0..10 among those kube-scheduler sends the extender (what it
    receives and adds, times the extender weight and 10)."""
    counts = [0] * 11
    if cycle_evaluation is not None and cycle_evaluation.applies and cycle_evaluation.scored:
        for ok, score in zip(cycle_evaluation.passed, cycle_evaluation.extender):
            if ok:
                counts[max(0, min(10, score))] += 1
    bars = [
        {"label": str(s), "value": n, "kind": "pass" if n else ""} for s, n in enumerate(counts)
    ]
    return bars, max(counts) or 1


def _top(placement: Placement) -> list[dict[str, Any]]:
    """The best final totals (kube-scheduler's ranking; the pick first), for the second chart."""
    scored = sorted(
        (n for n in placement.nodes if n.final is not None), key=lambda n: (-n.final, n.node)
    )[:TOP_BARS]
    best = scored[0].final if scored and scored[0].final else 1
    return [
        {
            "label": n.node,
            "value": n.final,
            "pct": round(n.final * 100 / best, 2),
            "pick": n.node in placement.pick,
        }
        for n in scored
    ]


def _reason_rows(before: dict[str, int], after: dict[str, int]) -> list[dict[str, Any]]:
    """The reasons of both sides, side by side: most nodes (draft, then published) first."""
    names = sorted(set(before) | set(after), key=lambda r: (-after.get(r, 0), -before.get(r, 0), r))
    return [
        {
            "reason": r,
            "before": before.get(r, 0),
            "after": after.get(r, 0),
            "changed": before.get(r, 0) != after.get(r, 0),
        }
        for r in names
    ]


def _compare(
    result: dict[str, Any], label: str
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The comparison with the published version as the cluster would see it (`result` is
    compare_placements(published, draft)): the pick, the feasible set and the reasons side by
    side, the nodes whose verdict or final total changes (their final rank before and after),
    and those changes by node for the main table."""
    changes = []
    by_node = {}
    for c in result["changes"]:
        b, a = c["before"], c["after"]
        row = {
            "node": c["node"],
            "verdict_changed": c["verdictChanged"],
            "before_verdict": b["verdict"],
            "after_verdict": a["verdict"],
            "before_by": b["by"] or "",
            "after_by": a["by"] or "",
            "before_final": b["final"] if b["final"] is not None else "—",
            "after_final": a["final"] if a["final"] is not None else "—",
            "before_rank": b["rank"] or "—",
            "after_rank": a["rank"] or "—",
            # a positive number means the node moved up (to a better rank)
            "moved": (b["rank"] - a["rank"]) if b["rank"] and a["rank"] else 0,
        }
        changes.append(row)
        by_node[c["node"]] = row
    changes.sort(key=lambda r: (not r["verdict_changed"], -abs(r["moved"]), r["node"]))
    return (
        {
            "label": label,
            "moves": result["moves"],
            "summary": result["summary"],
            "pick_before": result["pickBefore"],
            "pick_after": result["pickAfter"],
            "pick_changed": result["pickChanged"],
            "applies_before": result["appliesBefore"],
            "applies_after": result["appliesAfter"],
            "feasible_before": result["feasibleBefore"],
            "feasible_after": result["feasibleAfter"],
            "feasible_added": result["feasibleAdded"],
            "feasible_removed": result["feasibleRemoved"],
            "reasons": _reason_rows(result["reasonsBefore"], result["reasonsAfter"]),
            "reasons_changed": result["reasonsChanged"],
            "verdict_changes": result["verdictChanges"],
            "changes": changes,
        },
        by_node,
    )


def _problem_dicts(errors: list[FieldError]) -> list[dict[str, Any]]:
    return [
        {
            "path": e.path or "document",
            "message": e.message,
            "cel_message": e.cel_message,
            "kind": e.kind,
            "section": section_for(e.message) if e.kind == "type" else "",
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
    elif preview.comparison is not None:
        compare, changes = _compare(preview.comparison, given.compare_label)
    rows, hidden = _rows(preview, changes)
    drills = _drills(preview, rows)
    cycle, placement = preview.cycle, preview.placement
    histogram, hist_max = _histogram(cycle.evaluation)
    sent = [o for o in cycle.outcomes if o.policy_passed is not None]
    policy_reasons = Counter(o.policy_rule for o in sent if o.policy_passed is False)
    plugin_columns = [
        {"name": name, "label": PLUGIN_LABELS.get(name, name), "weight": weight}
        for name in SCORE_PLUGINS
        if (weight := cycle.profile.score_weight(name))
    ]
    advice = _advice(preview, given.document)
    queue = _queue(compiled, pod, cluster, given.document)
    reasons = placement.reasons()
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
        # the answer: where kube-scheduler puts the pod (its tie group), or why it cannot
        "pick": list(placement.pick),
        "pick_total": placement.final_total() if placement.pick else "",
        "answer": placement.summary(),
        "feasible": len(placement.feasible()),
        "reasons": list(reasons.items())[:3],
        "more_reasons": max(0, len(reasons) - 3),
        # the policy's part: its verdicts over the nodes kube-scheduler sends it
        "sent": len(sent),
        "policy_passing": sum(1 for o in sent if o.policy_passed),
        "policy_reasons": policy_reasons.most_common(3),
        "errors": sum(len(v) for v in evaluation.errors.values()),
        "error_nodes": len(evaluation.errors),
        "extender_weight": cycle.profile.extender_weight,
        "strategy": cycle.profile.strategy,
        "caveats": cycle.caveats,
        "admitted": cycle.admitted,
        "skipped_plugins": cycle.skipped,
        "failed_scheduling": cycle.failed_scheduling(),
        "advice": advice,
        "pins": test_pin_choices(preview=preview),
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
        "top": _top(placement),
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
