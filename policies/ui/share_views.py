"""Share links of the playground: POST /policies/<name>/share makes one of what the user sees
(the editor's text, the pod, the cluster source), GET /s/<token>/ opens it in the playground
for any signed-in viewer until it expires. The draft is never changed by a share.

The link keeps the snapshot it was made on by reference (source and version): the playground
says so when the cluster has changed since, and a pod of the snapshot that is gone by then is
previewed from the manifest kept with the link.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from policies import selectors, services
from policies.api.errors import http_status
from policies.cluster.sources import CLUSTER_KEYS, cluster_for
from policies.errors import ClusterUnavailable, InputError, NotFound, ServiceError
from policies.models import Policy
from policies.ui.access import page_access
from policies.ui.forms import pod_choice_parse
from policies.ui.preview import pod_manifest, pod_resolve


@page_access(roles={"POST": "viewer"})
def share_create(request: HttpRequest, name: str) -> HttpResponse:
    """A share link of the posted playground state (fragment with the link to copy)."""
    policy = Policy.objects.filter(name=name).first()
    if policy is None:
        return _answer(request, error=f"there is no policy {name!r}", status=404)
    document = request.POST.get("document", "")
    pod_value = request.POST.get("pod", "")[:600]
    pasted = request.POST.get("pod_yaml", "") if pod_value == "pasted" else ""
    cluster_key = request.POST.get("cluster", "")
    cluster_key = cluster_key if cluster_key in CLUSTER_KEYS else ""
    manifest, snapshot = "", ""
    try:
        cluster = cluster_for(key=cluster_key)
        snapshot = f"{cluster.source}:{cluster.version}"
        choice = pod_choice_parse(value=pod_value, pasted=pasted)
        if choice.kind == "snapshot":  # kept in case the pod is gone when the link is opened
            manifest = pod_manifest(choice=choice, pod=pod_resolve(choice=choice, cluster=cluster))
    except (InputError, ClusterUnavailable):
        pass  # the link shows what the playground showed: the same problem
    try:
        share = services.share_create(
            actor=request.user,
            policy=policy,
            document=document,
            pod=pod_value,
            pasted=pasted,
            pod_manifest=manifest,
            cluster=cluster_key,
            snapshot=snapshot,
            days=settings.SCHEDWEB_SHARE_DAYS,
            what_if=request.POST.get("what_if", ""),
        )
    except ServiceError as exc:
        details = exc.details if isinstance(exc.details, list) else []
        more = "; ".join(f"{d['path']}: {d['message']}" for d in details if isinstance(d, dict))
        return _answer(
            request, error=exc.message + (f" ({more})" if more else ""), status=http_status(exc)
        )
    url = request.build_absolute_uri(f"/s/{share.token}/")
    return _answer(request, share=share, url=url)


def _answer(request: HttpRequest, *, status: int = 200, **context) -> HttpResponse:
    context.setdefault("days", settings.SCHEDWEB_SHARE_DAYS)
    return render(request, "policies/_share_answer.html", context, status=status)


@page_access(roles={"GET": "viewer"})
def share_open(request: HttpRequest, token: str) -> HttpResponse:
    """The shared state in its policy's playground (404 once expired)."""
    try:
        share = selectors.share_get(token=token)
    except NotFound as exc:
        return render(request, "policies/share_missing.html", {"message": str(exc)}, status=404)
    return redirect(f"/policies/{share.policy.name}/?share={share.token}")
