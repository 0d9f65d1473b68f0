"""Developer-only pages (404 unless settings.DEBUG): the component gallery at /_dev/components/.

The gallery shows every UI component and a policy editor wired the way the playground is (htmx
posts the draft, the answer carries markers); the browser tests drive and screenshot it. It
uses the production editor support (completions, markers); production code never imports it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from policies.evaluation import policy_validate
from policies.numbers import number_or_none
from policies.ui.completions import cel_completions
from policies.ui.markers import markers_json

SAMPLE_POLICY = """\
name: gpu-packing
description: Pack GPU pods onto already-busy GPU nodes.
schedulerNames: [schedweb]          # other schedulers' pods pass through untouched
matchConditions:
  - name: gpu-pods
    expression: pod.requests.nvidia_com_gpu > 0
variables:
  - name: freeCpu
    expression: node.allocatable.cpu - node.requested.cpu
  - name: zone
    expression: node.labels["topology.kubernetes.io/zone"]
filters:
  - name: enough-cpu
    expression: variables.freeCpu >= pod.requests.cpu
    message: '"needs " + string(pod.requests.cpu) + "m CPU, " + string(variables.freeCpu) + "m free"'
    unresolvable: true
  - name: not-cordoned
    expression: '!node.unschedulable && node.taints.all(t, t.effect != "NoSchedule")'
scores:
  - name: pack
    expression: node.requested.cpu * 100 / node.allocatable.cpu
    weight: 2
    normalize: none
  - name: gpu-busy
    expression: |
      node.allocatable.nvidia_com_gpu == 0 ? 0 :
        node.requested.nvidia_com_gpu * 100 / node.allocatable.nvidia_com_gpu
    weight: 1
    normalize: minmax
failurePolicy: Ignore
"""


def _position(*, text: str, needle: str, occurrence: int = 1) -> tuple[int, int]:
    """1-based (line, column) of the n-th occurrence of `needle` in `text`."""
    at = -1
    for _ in range(occurrence):
        at = text.index(needle, at + 1)
    line = text.count("\n", 0, at) + 1
    return line, at - (text.rfind("\n", 0, at) + 1) + 1


def _marker(*, needle: str, occurrence: int = 1, length: int = 0, **fields: str) -> dict[str, Any]:
    line, column = _position(text=SAMPLE_POLICY, needle=needle, occurrence=occurrence)
    marker: dict[str, Any] = {"line": line, "column": column, **fields}
    if length:
        marker["endColumn"] = column + length  # exclusive, like the editor's API
    return marker


# Markers shown before the first preview, one of each severity, placed by searching the sample.
SAMPLE_MARKERS = [
    _marker(
        needle="node.allocatable.cpu\n",
        length=len("node.allocatable.cpu"),
        severity="error",
        message="evaluation error on 1 node (spot-c6-04): division by zero",
        source="scores[0].expression",
    ),
    _marker(
        needle="node.taints.all",
        severity="warning",
        message="kube-scheduler's TaintToleration plugin already rejects NoSchedule taints; "
        "this filter only adds a message",
        source="filters[1].expression",
    ),
    _marker(
        needle="minmax",
        severity="info",
        message="minmax scales over the candidates: a node's score depends on the other nodes",
        source="scores[1].normalize",
    ),
]


def sample_nodes() -> list[dict[str, Any]]:
    """Node results for the gallery's table and chart, worked out like the engine would.

    Policy: filter enough-cpu (free >= 500m); score pack = requested*100/allocatable, weight 2;
    score spread = 100 - podCount*100/110, weight 1; total = (2*pack + spread) / 3;
    extender = round(total / 10).
    """
    specs = [
        # name, allocatable cpu (m), requested cpu (m), pods, state
        ("gpu-a100-01", 64000, 51200, 61, ""),
        ("gpu-a100-02", 64000, 63800, 88, ""),
        ("gpu-a100-03", 64000, 12800, 14, ""),
        ("gpu-h100-01", 96000, 72000, 70, ""),
        ("gpu-h100-02", 96000, 24000, 22, ""),
        ("cpu-m5-07", 16000, 9000, 35, ""),
        ("cpu-m5-10", 16000, 15800, 102, ""),
        ("cpu-m5-11", 16000, 1200, 9, ""),
        ("spot-c6-03", 8000, 7600, 41, ""),
        ("spot-c6-04", 8000, 2000, 12, "error"),
        ("infra-01", 4000, 3900, 18, ""),
        ("infra-02", 4000, 1000, 6, ""),
    ]
    rows = []
    for name, alloc, req, pods, state in specs:
        free = alloc - req
        row: dict[str, Any] = {"name": name, "free": free, "pods": pods, "alloc": alloc}
        if state == "error":
            row.update(
                verdict="error",
                rule="zone",
                message="no such key: topology.kubernetes.io/zone",
            )
            rows.append(row)
            continue
        if free < 500:
            row.update(
                verdict="reject",
                rule="enough-cpu",
                message=f"needs 500m CPU, {free}m free",
            )
            rows.append(row)
            continue
        pack = req * 100 // alloc  # integer CEL division truncates: 51200*100/64000 = 80
        spread = 100 - pods * 100 // 110  # 61 pods: 100 - 6100/110 = 100 - 55 = 45
        total = (2 * pack + spread) / 3  # weighted mean: (2*80 + 45) / 3 = 68.33
        row.update(
            verdict="pass",
            rule="",
            message="",
            pack=pack,
            pack_w=2 * pack,
            spread=spread,
            spread_w=spread,
            total=round(total, 2),
            extender=int(total / 10 + 0.5),  # halves up: 68.33 -> 7
        )
        rows.append(row)
    return rows


def _histogram(*, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    counts = [0] * 11
    for row in rows:
        if row["verdict"] == "pass":
            counts[row["extender"]] += 1
    bars = [{"label": str(score), "value": n, "kind": ""} for score, n in enumerate(counts)]
    return bars, max(counts) or 1


def _require_debug() -> None:
    if not settings.DEBUG:
        raise Http404("The component gallery exists only with DEBUG on.")


@require_GET
def components(request: HttpRequest) -> HttpResponse:
    """Every UI component on one page, for designers, developers and the browser tests."""
    _require_debug()
    rows = sample_nodes()
    bars, bar_max = _histogram(rows=rows)
    verdicts = [
        {"label": v, "value": sum(r["verdict"] == v for r in rows), "kind": v}
        for v in ("pass", "reject", "error")
    ]
    now = timezone.now()
    context = {
        "nodes": rows,
        "score_bars": bars,
        "score_max": bar_max,
        "verdict_bars": verdicts,
        "verdict_max": len(rows),
        "policy_text": SAMPLE_POLICY,
        "completions": cel_completions(),
        "markers": SAMPLE_MARKERS,
        "now": now,
        "times": [
            ("Snapshot", now - timedelta(seconds=3)),
            ("Last publish", now - timedelta(minutes=42)),
            ("Cluster sync failed", now - timedelta(hours=5)),
            ("Created", now - timedelta(days=12)),
        ],
        "scheduler_config": (
            "apiVersion: kubescheduler.config.k8s.io/v1\n"
            "kind: KubeSchedulerConfiguration\n"
            "profiles:\n"
            "  - schedulerName: schedweb\n"
            "extenders:\n"
            '  - urlPrefix: "http://schedweb.schedweb.svc:8000/extender"\n'
            "    filterVerb: filter\n"
            "    prioritizeVerb: prioritize\n"
            "    weight: 1\n"
            "    nodeCacheCapable: true\n"
        ),
    }
    return render(request, "_dev/components.html", context)


@require_POST
def components_preview(request: HttpRequest) -> HttpResponse:
    """Validate the posted policy document and answer a fragment carrying the editor's markers
    (the playground's preview will answer the same way, with node results besides)."""
    _require_debug()
    text = request.POST.get("document", "")
    revision = request.POST.get("revision", "")
    errors = policy_validate(text)  # the installation's CEL budget, as publish would check
    markers = [
        {
            "line": e.doc_line,
            "column": e.doc_column or 1,
            "message": e.message,
            "severity": "error",
            "source": e.path,
        }
        for e in errors
        if e.doc_line
    ]
    unplaced = [e for e in errors if not e.doc_line]
    context = {
        "errors": errors,
        "markers_json": markers_json(markers=markers),
        "unplaced": unplaced,
        "revision": revision if number_or_none(revision) is not None else "",
        "lines": text.count("\n") + 1 if text else 0,
        "checked_at": timezone.now(),
    }
    return render(request, "_dev/_preview.html", context, status=422 if errors else 200)
