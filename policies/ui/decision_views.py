"""The sampled extender decisions' pages (the dashboard shows the recent ones: decision_summary).

    GET /decisions/            sampled decisions, filtered (pod, namespace, policy, node), paged
    GET /decisions/<id>/       why the pod went where it went: every node's breakdown

Pages need the viewer role; nothing here writes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404

from policies import selectors
from policies.cluster.loaded import pod_from_cluster
from policies.cluster.sources import cluster_default
from policies.engine.document import PolicyInvalid
from policies.engine.placement import competition_ranks
from policies.errors import ClusterUnavailable, InputError
from policies.evaluation import preview_run, profile_active
from policies.formatting import number_format
from policies.models import Decision
from policies.ui.access import page_access
from policies.ui.context import render_page

log = logging.getLogger(__name__)

DECISIONS_PER_PAGE = 50


def _number(value: Any) -> float | None:
    """`value` when it is a number (not a bool), else None: records are JSON, read defensively."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class _Record:
    """A stored decision record read defensively (it is JSON, possibly from an older extender)."""

    scores: list[str]
    weights: list[float]
    nodes: list[dict[str, Any]]
    readable: bool  # False: some of it could not be read
    winners: list[str]


def _record(decision: Decision) -> _Record:
    """The stored record's score names, weights, node entries and winners."""
    data = decision.nodes
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        return _Record([], [], [], False, [])
    scores = [str(s) for s in data.get("scores") or []]
    weights = [_number(w) or 0 for w in data.get("weights") or []]  # unreadable weight: 0
    nodes = [n for n in data["nodes"] if isinstance(n, dict) and n.get("n")]
    stored = data.get("winners")
    # The extender records the evaluation's winners; the totals it stores are rounded to 3
    # places, so recomputing from them (for records from before `winners`) can show false ties.
    winners = [str(w) for w in stored] if isinstance(stored, list) else _winners(nodes)
    return _Record(scores, weights, nodes, len(nodes) == len(data["nodes"]), winners)


def _winners(nodes: list[dict[str, Any]]) -> list[str]:
    """Passing nodes with the highest stored total (the extender's favourites; ties all win)."""
    totals = [
        (n["n"], n["total"]) for n in nodes if n.get("ok") and _number(n.get("total")) is not None
    ]
    if not totals:
        return []
    best = max(t for _, t in totals)
    return [name for name, t in totals if t == best]


def decision_summary(*, decision: Decision) -> dict[str, Any]:
    """A decision as one row: pod, policy version, verb, passing/total, winners, chosen node."""
    record = _record(decision)
    nodes = record.nodes
    return {
        "id": decision.pk,
        "at": decision.created_at,
        "namespace": decision.pod_namespace,
        "pod": decision.pod_name,
        "policy": decision.policy_name,
        "version": decision.policy_version,
        "verb": decision.verb,
        "passing": sum(1 for n in nodes if n.get("ok")),
        "total": len(nodes),
        "winners": record.winners,
        "chosen": decision.chosen_node,
    }


def decision_breakdown(*, decision: Decision) -> dict[str, Any]:
    """Every node of a decision: verdict, failing rule, each score raw -> normalized -> weighted
    (weighted = normalized x weight, as the engine computes it), total and extender score."""
    record = _record(decision)
    scores, weights, nodes, readable = record.scores, record.weights, record.nodes, record.readable
    winners = set(record.winners)
    rows = []
    for entry in nodes:
        raw = entry.get("raw") if isinstance(entry.get("raw"), list) else []
        norm = entry.get("norm") if isinstance(entry.get("norm"), list) else []
        cells = []
        for k, name in enumerate(scores):
            r = raw[k] if k < len(raw) else None
            n = _number(norm[k]) if k < len(norm) else None
            w = weights[k] if k < len(weights) else 0
            weighted = n * w if n is not None else None
            cells.append(
                {
                    "name": name,
                    "raw": r,
                    "normalized": n,
                    "weight": w,
                    "weighted": weighted,
                    "text": (
                        number_format(r),
                        number_format(n),
                        number_format(w),
                        number_format(weighted, places=1),
                    ),
                    "sort": "" if weighted is None else repr(weighted),
                }
            )
        errors = [e for e in entry.get("errors") or [] if isinstance(e, dict)]
        total = _number(entry.get("total"))
        rows.append(
            {
                "node": str(entry["n"]),
                "ok": bool(entry.get("ok")),
                "rule": entry.get("rule") or "",
                "message": entry.get("msg") or "",
                "errors": errors,
                "scores": cells if entry.get("ok") and raw else [],
                "total": total,
                "total_text": number_format(total),
                # the minibar's width: total is 0..100 by construction; clamped for a bad record
                "total_pct": round(min(max(total or 0, 0), 100)),
                "ext": _number(entry.get("ext")),
                "winner": entry["n"] in winners,
                "chosen": entry["n"] == decision.chosen_node,
            }
        )
    # Passing nodes first, best total first; rejected ones after, by name.
    rows.sort(key=lambda r: (not r["ok"], -(r["total"] or 0), r["node"]))
    # the policy's own rank among the nodes the extender was sent (not the answer: kube-
    # scheduler adds its plugins' scores and picks the highest final total)
    policy_ranks = competition_ranks(
        {r["node"]: r["total"] for r in rows if r["ok"] and r["total"] is not None}
    )
    for r in rows:
        r["policy_rank"] = policy_ranks.get(r["node"])
    passing = sum(1 for r in rows if r["ok"])
    chosen_in_list = any(r["chosen"] for r in rows)
    return {
        "summary": decision_summary(decision=decision),
        "scores": [
            {"name": name, "weight": weights[k] if k < len(weights) else 0}
            for k, name in enumerate(scores)
        ],
        "rows": rows,
        "passing": passing,
        "rejected": len(rows) - passing,
        "errors": sum(len(r["errors"]) for r in rows),
        "readable": readable,
        "chosen_in_list": chosen_in_list,
        "chosen_is_winner": decision.chosen_node in winners,
        "chosen_policy_rank": policy_ranks.get(decision.chosen_node),
        # The playground opens this pod with this version (its URL contract, ui-playground brief).
        "playground": f"/policies/{decision.policy_name}/?"
        + urlencode(
            {
                "version": decision.policy_version,
                "pod": f"{decision.pod_namespace}/{decision.pod_name}",
                # the recorded pod stands in once the pod is gone from the cluster
                **({"decision": decision.pk} if decision.pod_manifest else {}),
            },
            safe="/",
        ),
    }


class DecisionFilterForm(forms.Form):
    """The decision list's filters: exact names, as kube-scheduler reports them."""

    pod = forms.CharField(required=False, max_length=253, label="Pod name")
    namespace = forms.CharField(required=False, max_length=253)
    policy = forms.CharField(required=False, max_length=63)
    node = forms.CharField(required=False, max_length=253, label="Chosen node")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        for name, value in data.items():
            if isinstance(value, str) and "\x00" in value:
                self.add_error(name, "must not contain a NUL character")
        return data


@page_access(roles={"GET": "viewer"})
def decision_list(request: HttpRequest) -> HttpResponse:
    """Sampled extender decisions, newest first, filtered and paginated."""
    form = DecisionFilterForm(request.GET)
    if form.is_valid():
        filters = {k: v.strip() for k, v in form.cleaned_data.items()}
        queryset = selectors.decision_list(**filters)
    else:  # the errors show at their fields; nothing matches a filter that cannot be read
        filters, queryset = {}, Decision.objects.none()
    page = Paginator(queryset, DECISIONS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "form": form,
        "filtered": any(filters.values()),
        "page": page,
        "rows": [decision_summary(decision=d) for d in page.object_list],
        "query": query.urlencode(),
        "policy_names": Decision.objects.order_by("policy_name")
        .values_list("policy_name", flat=True)
        .distinct(),
    }
    return render_page(request, "ops/decisions.html", context)


def decision_model(*, decision: Decision) -> dict[str, Any]:
    """kube-scheduler's pick for the decision's pod as the model predicts it: the decision's
    policy version served by the extender, the stored scheduler configuration, the current
    snapshot (which may have moved on since the decision). {"error": why} when it cannot run."""
    document = selectors.policy_version_document(
        policy_name=decision.policy_name, number=decision.policy_version
    )
    if document is None:
        return {"error": f"{decision.policy_name} v{decision.policy_version} no longer exists"}
    try:
        cluster = cluster_default()
        pod = pod_from_cluster(
            cluster=cluster, namespace=decision.pod_namespace, name=decision.pod_name
        )
        profile = profile_active(scheduler_name=pod["schedulerName"])
        preview = preview_run(document=document, pod=pod, cluster=cluster, profile=profile)
    except (InputError, ClusterUnavailable, PolicyInvalid) as exc:
        return {"error": str(exc)}
    pick = list(preview.placement.pick)
    ranks = preview.placement.policy_ranks()
    return {
        "pick": pick,
        "answer": preview.placement.summary(),
        # the nodes of policy rank 1 among those kube-scheduler sends it (a column, not a pick)
        "policy_top": sorted(n for n, r in ranks.items() if r == 1),
        "chosen_in_pick": bool(decision.chosen_node) and decision.chosen_node in pick,
        "bound": bool(pod["nodeName"]),
        "cluster": cluster.describe(),
    }


@page_access(roles={"GET": "viewer"})
def decision_detail(request: HttpRequest, decision_id: int) -> HttpResponse:
    """Why the pod went where it went: the node kube-scheduler chose, the node the model says
    it picks, and every node's verdict, score breakdown and policy rank."""
    decision = get_object_or_404(Decision, pk=decision_id)
    return render_page(
        request,
        "ops/decision.html",
        {
            "decision": decision,
            "breakdown": decision_breakdown(decision=decision),
            "model": decision_model(decision=decision),
            "catch_up": decision_catch_up(decision=decision),
        },
    )


def decision_catch_up(*, decision: Decision) -> dict[str, str] | None:
    """When the request waited for the snapshot to catch up (issue 24): a sentence and the
    alert's kind; None when it did not."""
    data = decision.nodes if isinstance(decision.nodes, dict) else {}
    wait = data.get("catchUp")
    if not isinstance(wait, dict) or _number(wait.get("waitedMs")) is None:
        return None
    lacked = [str(n) for n in wait.get("nodes") or []]
    what = []
    if lacked:
        what.append(f"node{'s' if len(lacked) != 1 else ''} {', '.join(lacked)}")
    if wait.get("pod") is True:
        what.append("the pod itself")
    waited = f"Waited {wait['waitedMs']:.0f} ms for the snapshot to hold {' and '.join(what)}"
    if wait.get("outcome") == "caught-up":
        return {"kind": "info", "text": f"{waited}; judged once it did."}
    return {
        "kind": "warning",
        "text": f"{waited}; it did not in time, so the policy's failurePolicy applied to what"
        " it lacked.",
    }
