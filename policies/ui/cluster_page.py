"""The /cluster/ page: nodes and pods of the configured source as the engine sees them, with
its status in words (policies/cluster/status.py) and the same filters as the API
(policies/cluster/filters.py), in pages of PAGE_ROWS rows.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from policies.cluster.filters import PHASES, ZONE_LABEL, nodes_filtered, pods_filtered
from policies.cluster.status import cluster_status
from policies.engine.inputs import NodeView, PodView
from policies.errors import InputError
from policies.formatting import bytes_format, cpu_format, number_format
from policies.gangs import gang_mode_status
from policies.numbers import number_or_none
from policies.ui.access import page_access

GPU = "nvidia_com_gpu"
PAGE_ROWS = 200  # rows per table page


@page_access(roles={"GET": "viewer"})
def cluster_page(request: HttpRequest) -> HttpResponse:
    """Nodes and pods of the configured source as the engine sees them, and its status."""
    status, loaded = cluster_status()
    status["gangMode"] = gang_mode_status()
    context: dict[str, Any] = {"status": status, "filters": request.GET, "phases": PHASES}
    if loaded is not None:
        try:
            nodes = nodes_filtered(loaded=loaded, params=request.GET)
            pods = pods_filtered(loaded=loaded, params=request.GET)
        except InputError as exc:
            context["filter_error"] = str(exc)
            nodes, pods = loaded.state.nodes(), loaded.state.pods()
        context["nodes"] = _table_page(request, "nodes_page", nodes, node_row)
        context["pods"] = _table_page(request, "pods_page", pods, pod_row)
        context["zones"] = sorted(
            {n["labels"].get(ZONE_LABEL, "") for n in loaded.state.nodes()} - {""}
        )
        context["totals"] = _totals(loaded.state.nodes())
    return render(request, "cluster/page.html", context)


def _table_page(request: HttpRequest, param: str, items: list, to_row) -> dict[str, Any]:
    """One page of rows (PAGE_ROWS) with links that keep the other query parameters."""
    total = len(items)
    pages = max(1, -(-total // PAGE_ROWS))
    number = min(max(1, number_or_none(request.GET.get(param, "1")) or 1), pages)
    start = (number - 1) * PAGE_ROWS

    def link(n: int) -> str:
        query = request.GET.copy()
        query[param] = str(n)
        return "?" + query.urlencode()

    return {
        "rows": [to_row(item) for item in items[start : start + PAGE_ROWS]],
        "total": total,
        "number": number,
        "pages": pages,
        "first": start + 1 if total else 0,
        "last": min(start + PAGE_ROWS, total),
        "previous": link(number - 1) if number > 1 else "",
        "next": link(number + 1) if number < pages else "",
    }


def node_row(node: NodeView) -> dict[str, Any]:
    """A node for the page: formatted quantities and utilisation percentages."""
    alloc, used = node["allocatable"], node["requested"]
    conditions = node["conditions"]
    ready = conditions.get("Ready", "Unknown")
    # Pressure conditions are bad when True; the page lists only the bad ones.
    problems = [t for t, s in conditions.items() if t != "Ready" and s == "True"]
    return {
        "name": node["name"],
        "zone": node["labels"].get(ZONE_LABEL, ""),
        "labels": sorted(node["labels"].items()),
        "taints": node["taints"],
        "unschedulable": node["unschedulable"],
        "ready": ready,
        "problems": problems,
        "cpu": _usage(used["cpu"], alloc["cpu"], cpu_format),
        "memory": _usage(used["memory"], alloc["memory"], bytes_format),
        "gpu": _usage(used[GPU], alloc[GPU], number_format) if alloc[GPU] or used[GPU] else None,
        "pods": node["podCount"],
        "pods_max": alloc["pods"],
    }


def pod_row(pod: PodView) -> dict[str, Any]:
    """A pod for the page."""
    requests = pod["requests"]
    return {
        "namespace": pod["namespace"],
        "name": pod["name"],
        "node": pod["nodeName"],
        "phase": pod["phase"],
        "cpu": requests["cpu"],
        "cpu_text": cpu_format(requests["cpu"]),
        "memory": requests["memory"],
        "memory_text": bytes_format(requests["memory"]),
        "gpu": requests[GPU],
        "qos": pod["qosClass"],
        "scheduler": pod["schedulerName"],
        "owner": f"{pod['ownerKind']}/{pod['ownerName']}" if pod["ownerKind"] else "",
    }


def _totals(nodes: list[NodeView]) -> dict[str, Any]:
    cpu_used = sum(n["requested"]["cpu"] for n in nodes)
    cpu_alloc = sum(n["allocatable"]["cpu"] for n in nodes)
    mem_used = sum(n["requested"]["memory"] for n in nodes)
    mem_alloc = sum(n["allocatable"]["memory"] for n in nodes)
    return {
        "cpu": _usage(cpu_used, cpu_alloc, cpu_format),
        "memory": _usage(mem_used, mem_alloc, bytes_format),
        "ready": sum(1 for n in nodes if n["conditions"].get("Ready") == "True"),
        "cordoned": sum(1 for n in nodes if n["unschedulable"]),
    }


def _usage(used: int, allocatable: int, fmt) -> dict[str, Any]:
    # pct = used * 100 / allocatable, capped at 100 for the bar (overcommit shows as 100)
    pct = round(used * 100 / allocatable) if allocatable > 0 else 0
    return {
        "used": used,
        "alloc": allocatable,
        "text": f"{fmt(used)} / {fmt(allocatable)}",
        "pct": pct,
        "bar": min(pct, 100),
    }
