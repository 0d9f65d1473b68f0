"""Policy pages: the list, the playground (editor + live preview) and the side-by-side diff
(versions with publish and rollback: version_views.py; test cases: test_views.py, test_expect_views.py; the
background preview of all pending pods: preview_all_views.py).

Views parse input, call one service or selector (or the playground's preview presenter), and
render a page or an htmx fragment. Every page needs a login and the viewer role; every write
checks its role on the server (403 with a sentence) whatever the page showed.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone

from policies import selectors, services
from policies.api.errors import http_status
from policies.cluster.filters import pods_search
from policies.cluster.loaded import LoadedCluster, pod_from_cluster
from policies.cluster.sources import CLUSTER_KEYS, cluster_for
from policies.cluster.whatif import MAX_WHATIF_BYTES
from policies.engine.compare import rule_changes
from policies.engine.document import PolicyInvalid
from policies.errors import (
    ClusterUnavailable,
    EvaluationTooSlow,
    InputError,
    NotFound,
    PreconditionFailed,
    ServiceError,
)
from policies.evaluation import (
    policy_compile,
    policy_leaves_a_node,
    policy_test_case_count,
    request_guard,
    test_cases_run,
)
from policies.models import (
    Decision,
    Policy,
    PolicyActivation,
    PolicyVersion,
    SharedPreview,
)
from policies.numbers import number_or_none
from policies.roles import has_role

from .access import page_access
from .completions import policy_completions
from .diff import side_by_side
from .examples import example_pods, example_policies
from .forms import NewPolicyForm, PodChoice, pod_choice_parse
from .markers import error_markers, markers_json
from .preview import (
    PreviewInput,
    cluster_info,
    pod_resolve,
    preview_build,
)
from .reference import example_from

RECENT_PODS = 10
PICKER_PENDING_MAX = 200


def _policy(name: str) -> Policy:
    return get_object_or_404(Policy, name=name)


def _abilities(request: HttpRequest) -> dict[str, bool]:
    return {
        "can_edit": has_role(request.user, "editor"),
        "can_publish": has_role(request.user, "publisher"),
        "can_admin": has_role(request.user, "admin"),
    }


def _toast(response: HttpResponse, message: str, kind: str = "success") -> HttpResponse:
    response["HX-Trigger"] = json.dumps({"toast": {"message": message, "kind": kind}})
    return response


# --- list ---------------------------------------------------------------------------------------


def _policy_rows(*, search: str) -> list[dict[str, Any]]:
    """The list's rows: policy_list plus who activated the active version, and whether the
    draft differs from it (one extra query for all active versions)."""
    policies = list(selectors.policy_list(search=search))
    active = {
        a.policy_id: a
        for a in PolicyActivation.objects.filter(
            active=True, role="active", policy__in=[p.pk for p in policies]
        ).select_related("version", "activated_by")
    }
    rows = []
    for policy in policies:
        activation = active.get(policy.pk)
        version = activation.version if activation else None
        rows.append(
            {
                "policy": policy,
                "active_number": version.number if version else None,
                "activated_by": activation.activated_by.get_username()
                if activation and activation.activated_by
                else "",
                "activated_at": activation.activated_at if activation else None,
                "reason": activation.reason if activation else "",
                "latest_number": policy.latest_number,
                "draft_changed": version is None or version.document != policy.draft,
                "scheduler_names": version.scheduler_names
                if version
                else selectors.policy_scheduler_names(document=policy.draft),
            }
        )
    return rows


@page_access(roles={"GET": "viewer", "POST": "editor"})
def policy_list(request: HttpRequest) -> HttpResponse:
    """GET: every policy with its state; POST: create one from an example or the blank one."""
    form = NewPolicyForm(request.POST or None)
    problems: list[Any] = []
    create_error = ""
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                policy = services.policy_create(actor=request.user, document=form.document())
            except PolicyInvalid as exc:
                problems, status = exc.errors, 422
                create_error = "The document has problems; fix them or choose another name."
            except ServiceError as exc:
                create_error, status = (
                    exc.message[:1].upper() + exc.message[1:] + ".",
                    http_status(exc),
                )
            else:
                messages.success(request, f"Created policy {policy.name} (a draft, not active).")
                return redirect("policy-playground", name=policy.name)
        else:
            status = 422
    search = request.GET.get("q", "").strip()[:100]
    rows = _policy_rows(search=search)
    # ?pod=ns/name (the cluster page's "Preview…"): each policy opens on that pod, the policies
    # that target its scheduler first
    preview_pod = request.GET.get("pod", "")[:510] if "/" in request.GET.get("pod", "") else ""
    scheduler = ""
    if preview_pod:
        namespace, _, pod_name = preview_pod.partition("/")
        try:
            found = pod_from_cluster(
                cluster=cluster_for(key=""), namespace=namespace, name=pod_name
            )
            scheduler = found["schedulerName"]
        except (InputError, ClusterUnavailable):
            scheduler = ""
        if scheduler:
            rows.sort(key=lambda r: scheduler not in r["scheduler_names"])
    context = {
        "preview_pod": preview_pod,
        "preview_pod_scheduler": scheduler,
        "preview_pod_targeted": any(scheduler in r["scheduler_names"] for r in rows)
        if scheduler
        else False,
        "rows": rows,
        "search": search,
        "form": form,
        "examples": example_policies(),
        "create_error": create_error,
        "problems": problems,
        "open_dialog": request.method == "POST",
        **_abilities(request),
    }
    return render(request, "policies/list.html", context, status=status)


# --- playground ---------------------------------------------------------------------------------


def _session_state(request: HttpRequest, name: str) -> dict[str, Any]:
    return request.session.get(f"playground:{name}", {})


def _remember(request: HttpRequest, name: str, **values: Any) -> None:
    """Keeps the chosen pod, pasted YAML and cluster per policy in the session (written only
    when something changed: a session write is a database write)."""
    key = f"playground:{name}"
    state = dict(request.session.get(key, {}))
    if any(state.get(k) != v for k, v in values.items()):
        state.update(values)
        request.session[key] = state


def _pod_options(*, cluster: Any, scheduler_names: list[str]) -> dict[str, Any]:
    """The pod picker: pending pods of the snapshot (targeted ones first), recently created
    bound pods, and the example pods."""
    pending, bound = [], []
    for pod in cluster.state.pods() if cluster is not None else ():
        if not pod["nodeName"] and pod["phase"] == "Pending":
            pending.append(pod)
        elif pod["nodeName"] and pod["phase"] in ("Pending", "Running"):
            bound.append(pod)
    pending.sort(
        key=lambda p: (p["schedulerName"] not in scheduler_names, p["namespace"], p["name"])
    )

    def created(pod: dict[str, Any]) -> str:
        return (pod["object"].get("metadata") or {}).get("creationTimestamp") or ""

    recent = sorted((p for p in bound if created(p)), key=created, reverse=True)[:RECENT_PODS]

    def option(pod: dict[str, Any]) -> dict[str, Any]:
        return {
            "value": f"{pod['namespace']}/{pod['name']}",
            "label": f"{pod['namespace']}/{pod['name']}",
            "scheduler": pod["schedulerName"],
            "targeted": pod["schedulerName"] in scheduler_names,
            "node": pod["nodeName"],
        }

    return {
        "pending": [option(p) for p in pending[:PICKER_PENDING_MAX]],
        "pending_total": len(pending),
        "recent": [option(p) for p in recent],
        "examples": [
            {
                "value": f"example:{e.key}",
                "label": f"{e.key}.yaml ({e.namespace}/{e.name})",
                "scheduler": e.scheduler_name,
                "targeted": e.scheduler_name in scheduler_names,
            }
            for e in example_pods()
        ],
    }


# Targeted pods the playground tries before it opens: at most this many policy evaluations over
# the cluster (the demo's 36 nodes: 0.04 ms median, 8 ms at most per pod for the shipped examples,
# measured on a loaded 2-core machine), under one request guard, so a hostile document costs at
# most SCHEDWEB_PREVIEW_SECONDS more.
OPENING_POD_TRIES = 8


def _default_pod(
    options: dict[str, Any], *, document: str = "", cluster: LoadedCluster | None = None
) -> str:
    """A pending pod the policy targets, else such an example, else anything there is. Given
    the document and the cluster, the first targeted one the policy's filters leave a node for:
    the playground does not open on a wall of red (seed 003 rejects every long-named pod on
    all 36 demo nodes; its comment points at abc.yaml)."""
    targeted = [o["value"] for g in ("pending", "examples") for o in options[g] if o["targeted"]]
    if document and cluster is not None:
        try:
            with request_guard():
                for value in targeted[:OPENING_POD_TRIES]:
                    pod = pod_resolve(choice=pod_choice_parse(value=value), cluster=cluster)
                    if policy_leaves_a_node(document=document, pod=pod, cluster=cluster):
                        return value
        except (PolicyInvalid, ServiceError):
            pass  # the preview that follows shows the document's errors or the refusal
    if targeted:
        return targeted[0]
    for group in ("pending", "examples"):
        if options[group]:
            return options[group][0]["value"]
    return "pasted"


def _compare_source(policy: Policy) -> tuple[str | None, str]:
    active = selectors.policy_get_active(policy=policy)
    return (active.document, f"v{active.number}") if active else (None, "")


POD_SEARCH_LIMIT = 20


@page_access(roles={"GET": "viewer"})
def pod_search(request: HttpRequest, name: str) -> HttpResponse:
    """The pods of the snapshot matching ?q= (namespace/name parts and label=value terms), as
    buttons the playground turns into the chosen pod (fragment)."""
    _policy(name)
    query = request.GET.get("q", "").strip()
    cluster_key = request.GET.get("cluster", "")
    context: dict[str, Any] = {"query": query, "pods": [], "limit": POD_SEARCH_LIMIT}
    if query:
        try:
            cluster = cluster_for(key=cluster_key if cluster_key in CLUSTER_KEYS else "")
            context["pods"] = pods_search(loaded=cluster, query=query, limit=POD_SEARCH_LIMIT)
        except (InputError, ClusterUnavailable) as exc:
            context["error"] = str(exc)
    return render(request, "policies/_pod_matches.html", context)


def _share_for(request: HttpRequest, policy: Policy) -> SharedPreview | None:
    """The unexpired share link of this policy named by ?share=, or None; 404 otherwise."""
    token = request.GET.get("share", "")
    if not token:
        return None
    try:
        share = selectors.share_get(token=token)
    except NotFound as exc:
        raise Http404(str(exc)) from None
    if share.policy_id != policy.pk:
        raise Http404("this share link belongs to another policy")
    return share


def _share_note(share: SharedPreview, cluster: Any) -> dict[str, Any]:
    """What the banner of a shared playground says: who shared it, when, whether the cluster
    changed since, and whether its pod is gone (then its kept manifest stands in)."""
    snapshot_now = f"{cluster.source}:{cluster.version}" if cluster is not None else ""
    pod_gone = False
    if share.pod_manifest and cluster is not None and "/" in share.pod:
        namespace, _, pod_name = share.pod.partition("/")
        pod_gone = not any(
            p["namespace"] == namespace and p["name"] == pod_name for p in cluster.state.pods()
        )
    return {
        "by": share.created_by.get_username() if share.created_by else "someone",
        "at": share.created_at,
        "expires": share.expires_at,
        "cluster_changed": bool(share.snapshot) and share.snapshot != snapshot_now,
        "pod_gone": pod_gone,
    }


def _decision_pod(request: HttpRequest, cluster: Any, pod_value: str) -> str:
    """The manifest a decision (?decision=<id>) recorded for `pod_value` when that pod is no
    longer in the cluster, else ""."""
    decision_id = number_or_none(request.GET.get("decision", ""))
    if decision_id is None or "/" not in pod_value:
        return ""
    namespace, _, pod_name = pod_value.partition("/")
    if cluster is not None and any(
        p["namespace"] == namespace and p["name"] == pod_name for p in cluster.state.pods()
    ):
        return ""
    decision = Decision.objects.filter(
        pk=decision_id, pod_namespace=namespace, pod_name=pod_name
    ).first()
    return decision.pod_manifest if decision is not None else ""


@page_access(roles={"GET": "viewer"})
def playground(request: HttpRequest, name: str) -> HttpResponse:
    """The editor on the draft (or ?version=N), with a first preview rendered in the page."""
    policy = _policy(name)
    active = selectors.policy_get_active(policy=policy)
    document, editing = policy.draft, None
    version_param = request.GET.get("version", "")
    if version_param:
        number = number_or_none(version_param)
        if number is None:
            raise Http404(f"version {version_param!r} is not a number")
        version = PolicyVersion.objects.filter(policy=policy, number=number).first()
        if version is None:
            raise Http404(f"policy {policy.name} has no version {version_param}")
        document, editing = version.document, version.number
    state = _session_state(request, name)
    share = _share_for(request, policy)
    if share is not None:  # a share link: its text, pod and cluster (the draft stays as it is)
        document, editing = share.document, None
        state = {"cluster": share.cluster, "pod": share.pod, "pasted": share.pasted}
    example = example_from(request)
    if example is not None:  # a reference example, unsaved in the editor (the draft stays)
        if example.kind == "pod":
            state = {**state, "pod": "pasted", "pasted": example.block.text}
        else:
            document, editing = example.document(name=policy.name), None
    cluster_key = request.GET.get("cluster", state.get("cluster", ""))
    if cluster_key not in CLUSTER_KEYS:
        cluster_key = ""
    cluster, cluster_error = None, ""
    try:
        cluster = cluster_for(key=cluster_key)
    except (ClusterUnavailable, InputError) as exc:
        cluster_error = str(exc)
    options = _pod_options(
        cluster=cluster,
        scheduler_names=selectors.policy_scheduler_names(document=document),
    )
    pasted = state.get("pasted", "")
    pod_value = (
        request.GET.get("pod")
        or state.get("pod")
        or _default_pod(options, document=document, cluster=cluster)
    )
    share_note = _share_note(share, cluster) if share is not None else None
    if share_note and share_note["pod_gone"]:  # previewed from the manifest kept with the link
        pod_value, pasted = "pasted", share.pod_manifest
    recorded = _decision_pod(request, cluster, pod_value)
    if recorded:  # a decision's pod that is gone: previewed from the decision's record
        pod_value, pasted = "pasted", recorded
    pod_error = ""
    try:
        choice = pod_choice_parse(value=pod_value, pasted=pasted)
    except InputError as exc:
        pod_error = str(exc)
        choice = pod_choice_parse(value=_default_pod(options), pasted=pasted)
    compare = request.GET.get("compare") == "1" and active is not None
    what_if = share.what_if if share is not None else state.get("what_if", "")
    preview = preview_build(
        given=PreviewInput(
            document=document,
            pod=choice,
            cluster_key=cluster_key,
            compare_document=active.document if compare else None,
            compare_label=f"v{active.number}" if active else "",
            what_if=what_if,
        )
    )
    known = {o["value"] for group in ("pending", "recent", "examples") for o in options[group]}
    tests = list(policy.test_cases.all())
    context = {
        "policy": policy,
        "active": active,
        "latest": policy.versions.order_by("-number").values_list("number", flat=True).first(),
        "document": document,
        "editing": editing,
        "draft_changed": active is None or active.document != policy.draft,
        "options": options,
        "share": share,
        "share_note": share_note,
        "example": example,
        "what_if": what_if,
        "recorded_pod": bool(recorded),
        "choice": choice,
        "choice_known": choice.value in known or choice.kind == "pasted",
        "choice_in_cluster": cluster is not None
        and choice.kind == "snapshot"
        and any(
            p["namespace"] == choice.namespace and p["name"] == choice.name
            for p in cluster.state.pods()
        ),
        "pasted": pasted,
        "pod_error": pod_error,
        "cluster_key": cluster_key,
        "cluster": cluster_info(cluster=cluster) if cluster is not None else None,
        "cluster_error": cluster_error,
        "demo_available": settings.SCHEDWEB_CLUSTER_SOURCE != "demo",
        "settings_source": settings.SCHEDWEB_CLUSTER_SOURCE,
        "compare": compare,
        "preview": preview,
        "markers_json": markers_json(markers=preview.get("markers", [])),
        "completions": policy_completions(
            document=document, nodes=cluster.nodes() if cluster is not None else []
        ),
        "tests": tests,
        "tests_count": policy_test_case_count(
            stored_names=(t.name for t in tests), document=document
        ),
        "pending_count": options["pending_total"],
        **_abilities(request),
    }
    return render(request, "policies/playground.html", context)


def _preview_choice(request: HttpRequest) -> PodChoice:
    return pod_choice_parse(
        value=request.POST.get("pod", ""), pasted=request.POST.get("pod_yaml", "")
    )


@page_access(roles={"POST": "viewer"})
def preview(request: HttpRequest, name: str) -> HttpResponse:
    """The live preview: the posted document for the chosen pod, as a fragment.

    200 with the result; 422 when the document is invalid (markers and the problem list; the
    page keeps the last good table, marked outdated) or the pod cannot be used. The answer
    echoes `seq` (X-Preview-Seq) so the page can drop answers older than its latest request.
    """
    document = request.POST.get("document", "")
    cluster_key = request.POST.get("cluster", "")
    if cluster_key not in CLUSTER_KEYS:
        cluster_key = ""
    compare_document, compare_label = None, ""
    if request.POST.get("compare") == "1":
        compare_document, compare_label = _compare_source(_policy(name))
    what_if = request.POST.get("what_if", "")
    try:
        choice = _preview_choice(request)
    except InputError as exc:
        result: dict[str, Any] = {"state": "unavailable", "message": str(exc), "markers": []}
    else:
        result = preview_build(
            given=PreviewInput(
                document=document,
                pod=choice,
                cluster_key=cluster_key,
                compare_document=compare_document,
                compare_label=compare_label,
                what_if=what_if,
            )
        )
        _remember(
            request,
            name,
            pod=choice.value,
            cluster=cluster_key,
            what_if=what_if[:MAX_WHATIF_BYTES],
            **({"pasted": choice.text} if choice.kind == "pasted" else {}),
        )
    revision = request.POST.get("revision", "")
    seq = request.POST.get("seq", "")
    context = {
        "preview": result,
        "markers_json": markers_json(markers=result.get("markers", [])),
        "revision": revision if number_or_none(revision) is not None else "",
        "checked_at": timezone.now(),
        "oob": True,
        "compare_requested": request.POST.get("compare") == "1",
        **_abilities(request),  # can_edit: the result offers what "Add as test case" pins
    }
    response = render(
        request,
        "policies/_preview_answer.html",
        context,
        status=200 if result["state"] == "ok" else 422,
    )
    response["X-Preview-State"] = result["state"]
    if number_or_none(seq) is not None:
        response["X-Preview-Seq"] = seq
    if number_or_none(revision) is not None:
        response["X-Preview-Revision"] = revision
    return response


@page_access(roles={"POST": "editor"})
def draft_save(request: HttpRequest, name: str) -> HttpResponse:
    """Saves the editor's text as the draft if nobody saved since it was read (If-Match).

    A stale save changes nothing and answers the current draft so the page can offer to load
    it, keeping the user's own text; an invalid document is refused with its problems."""
    policy = _policy(name)
    document = request.POST.get("document", "")
    if_match = request.POST.get("if_match", "")
    context: dict[str, Any] = {"policy": policy}
    try:
        saved = services.policy_update_draft(
            actor=request.user, policy=policy, document=document, if_match=if_match
        )
    except PolicyInvalid as exc:
        markers, _ = error_markers(text=document, errors=exc.errors)
        context.update(
            outcome="invalid", problems=exc.errors, markers_json=markers_json(markers=markers)
        )
        status = 422
    except PreconditionFailed as exc:
        current = Policy.objects.get(pk=policy.pk)
        last = selectors.audit_list(policy_name=name, action="policy.update_draft").first()
        context.update(
            outcome="stale",
            message=exc.message,
            current=current,
            saved_by=last.actor_name if last else "",
            saved_at=last.created_at if last else current.updated_at,
        )
        status = 412
    except ServiceError as exc:
        context.update(outcome="refused", message=exc.message)
        status = 422
    else:
        context.update(outcome="saved", policy=saved)
        response = render(request, "policies/_save_answer.html", context)
        return _toast(response, f"Draft saved (revision {saved.draft_revision}).")
    # playground.js swaps a 412 answer too (the page's htmx config swaps only 2xx and 422)
    return render(request, "policies/_save_answer.html", context, status=status)


def _run_tests(policy: Policy, document: str) -> tuple[list[dict[str, Any]] | None, str]:
    """The test cases on `document`, under the request guard like every preview."""
    try:
        with request_guard():
            compiled = policy_compile(document)
            return test_cases_run(compiled=compiled, stored=policy.test_cases.all()), ""
    except PolicyInvalid as exc:
        return None, f"The document has {len(exc.errors)} problem(s); tests cannot run: {exc}"
    except EvaluationTooSlow as exc:
        return None, f"The test cases could not run: {exc}"


# --- diff ---------------------------------------------------------------------------------------


def _document_of(policy: Policy, ref: str) -> tuple[str, str]:
    """(document, label) of "draft" or a version number."""
    if ref == "draft":
        return policy.draft, "draft"
    number = number_or_none(ref)
    if number is None:
        raise Http404(f"{ref!r} is neither draft nor a version number")
    version = PolicyVersion.objects.filter(policy=policy, number=number).first()
    if version is None:
        raise Http404(f"policy {policy.name} has no version {ref}")
    return version.document, f"v{version.number}"


@page_access(roles={"GET": "viewer"})
def diff_pick(request: HttpRequest, name: str) -> HttpResponse:
    """The pickers' GET form lands here and goes on to the canonical diff URL."""
    policy = _policy(name)
    a = request.GET.get("a", "") or "draft"
    b = request.GET.get("b", "") or "draft"
    return redirect("policy-diff", name=policy.name, a=a, b=b)


@page_access(roles={"GET": "viewer"})
def diff_page(request: HttpRequest, name: str, a: str, b: str) -> HttpResponse:
    """Two documents side by side (versions or the draft), with the rule-level summary."""
    policy = _policy(name)
    old, old_label = _document_of(policy, a)
    new, new_label = _document_of(policy, b)
    if number_or_none(a) is not None and number_or_none(b) is not None:
        rules = selectors.version_diff(policy=policy, a=int(a), b=int(b))["rules"]
    else:
        rules = rule_changes(old, new)
    versions = list(policy.versions.select_related("author").order_by("-number"))
    context = {
        "policy": policy,
        "a": a,
        "b": b,
        "old_label": old_label,
        "new_label": new_label,
        "diff": side_by_side(old=old, new=new),
        "rules": rules,
        "versions": versions,
        "active": selectors.policy_get_active(policy=policy),
        "identical": old == new,
        "self_url": reverse("policy-diff", kwargs={"name": policy.name, "a": a, "b": b}),
    }
    return render(request, "policies/diff.html", context)
