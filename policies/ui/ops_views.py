"""Ops pages: sign-in, the dashboard and the connect page (decision_views: the sampled decisions).

    GET /                      dashboard: active policies, cluster snapshot, extender health,
                               recent decisions and audit events
    GET /dashboard/health      the health card alone (htmx polls it every 5 s)
    GET|POST /login/           Django's LoginView with our template; POST /logout/
    GET /connect/              KubeSchedulerConfiguration, second-scheduler manifests and the
                               extender's RBAC for this installation (htmx re-renders the options)

Every source the dashboard reads may be down: each section then says so in a sentence instead of
failing the page (DESIGN.md section 10). Pages need the viewer role; nothing here writes.
"""

from __future__ import annotations

import logging
import re
import shlex
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import LoginView, LogoutView
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone

from policies import selectors, services, throttle
from policies.cluster.status import cluster_status
from policies.errors import InputError
from policies.evaluation import profile_active
from policies.extender.metrics import recent_summary
from policies.health import database_check, redis_check
from policies.models import AuditEvent, PolicyActivation
from policies.redis import redis_client
from policies.rollout.selectors import shadows_overview
from policies.schedmodel.pipeline import SCORE_PLUGINS
from policies.schedulerconfig import (
    IN_CLUSTER_EXTENDER_URL,
    MANAGED_RESOURCE,
    MAX_URL_LENGTH,
    BindScopeError,
    SchedulerSetup,
    dump_yaml,
    extender_url_problem,
    extender_urls,
    queue_webhook_configuration,
    rbac_command,
    scheduler_configuration,
    schedweb_rbac,
    second_scheduler_yaml,
    url_is_loopback,
    webhook_admission_configuration,
    webhook_url,
)
from policies.ui.access import page_access
from policies.ui.context import render_page
from policies.ui.decision_views import decision_summary

log = logging.getLogger(__name__)

RECENT = 10  # rows of recent decisions and audit events on the dashboard
HEALTH_MINUTES = 5  # the extender health window (metrics are bucketed per minute)
HEALTH_POLL_SECONDS = 5


# --- sign-in and sign-out -----------------------------------------------------------------------


class SignInView(LoginView):
    """Django's LoginView with our look; signed-in users skip it."""

    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        # Too many failures for this username or from this address (policies/throttle.py): 429
        # and the form again, unchecked, so no guess can succeed while the lockout lasts.
        username = str(request.POST.get("username", ""))[:150]
        wait = throttle.login_retry_after(username, throttle.client_ip(request))
        if wait:
            form = self.get_form_class()(request, initial={"username": username})
            response = self.render_to_response(
                self.get_context_data(
                    form=form,
                    throttled=f"Signing in is paused for this account or this address after "
                    f"repeated failures. Try again in about {max(1, -(-wait // 60))} min.",
                ),
                status=429,
            )
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        throttle.login_failed(
            str(self.request.POST.get("username", ""))[:150], throttle.client_ip(self.request)
        )
        return super().form_invalid(form)

    def form_valid(self, form: Any) -> HttpResponse:
        throttle.login_succeeded(form.get_user().get_username())
        return super().form_valid(form)


def admin_sign_in(request: HttpRequest) -> HttpResponse:
    """Django admin's sign-in under the same throttle as /login/ (policies/throttle.py)."""
    from django.contrib import admin

    if request.method != "POST":
        return admin.site.login(request)
    username = str(request.POST.get("username", ""))[:150]
    ip = throttle.client_ip(request)
    wait = throttle.login_retry_after(username, ip)
    if wait:
        response = HttpResponse(
            "Too many failed sign-ins for this account or from this address; "
            f"try again in about {max(1, -(-wait // 60))} min.",
            status=429,
            content_type="text/plain; charset=utf-8",
        )
        response["Retry-After"] = str(wait)
        return response
    response = admin.site.login(request)
    if request.user.is_authenticated:  # signed in (LoginView.form_valid ran)
        throttle.login_succeeded(username)
    else:  # the form again, with its error
        throttle.login_failed(username, ip)
    return response


class SignOutView(LogoutView):
    """POST signs out and returns to the sign-in page with a note; GET asks to confirm."""

    next_page = "/login/"
    http_method_names = ["get", "post", "options"]

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect(self.next_page)
        return render_page(request, "ops/signout.html", {})

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        was_signed_in = request.user.is_authenticated
        response = super().post(request, *args, **kwargs)
        if was_signed_in:
            messages.info(request, "You have signed out.")
        return response


# --- dashboard ----------------------------------------------------------------------------------


@dataclass
class Section:
    """What one dashboard card shows: its rows, or the sentence that says why it cannot."""

    items: list[Any] = field(default_factory=list)
    error: str = ""


def _section(load: Callable[[], list[Any]], *, what: str) -> Section:
    """Runs `load`; a database that does not answer becomes a sentence naming `what`."""
    try:
        return Section(items=load())
    except DatabaseError as exc:
        log.warning("dashboard: %s unavailable: %s", what, exc)
        return Section(
            error=f"The database is not answering ({exc.__class__.__name__}), so {what} cannot "
            "be shown. Extenders keep serving the policy versions they hold."
        )


def active_policies() -> list[dict[str, Any]]:
    """Every active policy version with who activated it and when, by policy name."""
    activations = (
        PolicyActivation.objects.filter(active=True, role="active")
        .select_related("policy", "version", "version__author", "activated_by")
        .order_by("policy__name")
    )
    return [
        {
            "name": a.policy.name,
            "description": a.policy.description,
            "version": a.version.number,
            "scheduler_names": a.version.scheduler_names,
            "by": a.activated_by.get_username() if a.activated_by else "system",
            "author": a.version.author.get_username() if a.version.author else "system",
            "at": a.activated_at,
            "reason": a.reason,
            "message": a.version.message,
        }
        for a in activations
    ]


_AUDIT_VERBS = {
    "policy.create": "created",
    "policy.import": "imported",
    "policy.update_draft": "edited the draft of",
    "policy.publish": "published",
    "policy.rollback": "rolled back",
    "policy.deactivate": "deactivated",
    "policy.shadow": "published a shadow version of",
    "policy.promote": "promoted the shadow version of",
    "policy.shadow_discard": "ended the shadow version of",
    "policy.canary": "published a canary version of",
    "policy.canary_promote": "promoted the canary version of",
    "policy.canary_abort": "ended the canary version of",
    "policy.delete": "deleted",
    "testcase.create": "added a test case to",
    "testcase.update": "changed a test case of",
    "testcase.delete": "deleted a test case of",
    "testcase.accept": "accepted new results for a test case of",
    "schedulerprofile.set": "set the scheduler profile previews model",
    "share.create": "shared a playground link of",
    "token.create": "created an API token",
    "token.revoke": "revoked an API token",
}


# Why a shadow ended (services._shadow_end), as the note of its audit row.
_SHADOW_ENDS = {
    "discarded": "discarded",
    "deactivated": "the policy was deactivated",
    "active": "it became the active version",
    "aborted": "aborted: the stable version decides every pod",
    "rollback": "a rollback replaced the version it was measured against",
    "published": "a new version was published for every pod",
    "quiet": "no guard trip for its quiet period",
}


def guard_words(detail: dict[str, Any]) -> str:
    """The guard's rollback in words: which rate, the canary's and the stable version's, and
    the threshold (policies/rollout/guard.py's figures, as the audit row keeps them)."""
    reason = detail.get("reason")
    rate = "errorRate" if reason == "errors" else "rejectedRate"
    what = "evaluation errors" if reason == "errors" else "pods rejected on every node"
    canary, stable = detail.get("canary") or {}, detail.get("stable") or {}
    threshold = detail.get("threshold") or {}
    return (
        f"the guard rolled it back: {what} {canary.get(rate, '?')}% of "
        f"{canary.get('judged', '?')} pods against the stable version's {stable.get(rate, '?')}% "
        f"(threshold {threshold.get(rate, '?')} points, after {threshold.get('minPods', '?')} pods)"
    )


def audit_row(*, event: AuditEvent) -> dict[str, Any]:
    """An audit event as a sentence: who, did what, to which policy (version), when."""
    detail = event.detail if isinstance(event.detail, dict) else {}
    # an action without a sentence yet still reads as words, never as `testcase.accept`
    verb = _AUDIT_VERBS.get(event.action) or event.action.replace(".", " ").replace("_", " ")
    note = ""
    if event.action == "policy.rollback" and event.version:
        note = f"to v{event.version}"
        if detail.get("message"):
            note += f": {detail['message']}"
    elif event.action in (
        "policy.publish",
        "policy.shadow",
        "policy.promote",
        "policy.canary",
    ) and detail.get("message"):
        note = str(detail["message"])
    elif event.action == "policy.canary_abort" and detail.get("why") == "guard":
        note = guard_words(detail)
    elif event.action in ("policy.shadow_discard", "policy.canary_abort", "policy.canary_promote"):
        note = _SHADOW_ENDS.get(detail.get("why"), "")
        if detail.get("message"):
            note = f"{note}: {detail['message']}" if note else str(detail["message"])
    elif event.action.startswith("testcase.") and detail.get("name"):
        note = str(detail["name"])
    elif event.action.startswith("token.") and detail.get("user"):
        note = f"for {detail['user']}"
    return {
        "actor": event.actor_name or "system",
        "action": event.action,
        "verb": verb,
        "policy": event.policy_name,
        "version": event.version if event.action != "policy.rollback" else None,
        "note": note,
        "at": event.created_at,
        # deleted policies have no page to link to
        "link": bool(event.policy_name) and event.action != "policy.delete",
    }


def _extender_summary(*, redis_error: str) -> dict[str, Any]:
    """recent_summary() for the card, or the sentence saying why there are no numbers."""
    if redis_error:
        return {"error": "Redis is down: no extender numbers until it is back."}
    try:
        summary = recent_summary(redis_client(), minutes=HEALTH_MINUTES)
    except Exception as exc:
        log.warning("dashboard: extender metrics unavailable: %s", exc)
        problem = exc.__class__.__name__
        return {"error": f"The extender's numbers could not be read from Redis ({problem})."}
    requests = summary["requests"] or 0
    errors = summary["errors"] or 0
    return {
        "error": "",
        "rps": summary["requestsPerSecond"],
        "p99": summary["p99Ms"],
        "requests": int(requests),
        "errors": int(errors),
        # error share = errors * 100 / requests, in percent
        "error_pct": (errors * 100 / requests) if requests else 0.0,
    }


def _cluster() -> dict[str, Any]:
    """cluster_status() without its sync-run history; never raises."""
    try:
        status, _loaded = cluster_status(runs=1)
    except Exception as exc:  # a live source reads Redis and the database; both may fail
        log.warning("dashboard: cluster status unavailable: %s", exc)
        return {
            "available": False,
            "source": settings.SCHEDWEB_CLUSTER_SOURCE,
            "status": "unavailable",
            "stale": True,
            "error": f"The cluster status could not be read ({exc.__class__.__name__}).",
        }
    return status


def health_context() -> dict[str, Any]:
    """Everything the health card shows; each part degrades to a sentence on its own."""
    database_error = database_check()
    redis_error = redis_check()
    return {
        "database_error": database_error,
        "redis_error": redis_error,
        "extender": _extender_summary(redis_error=redis_error),
        "cluster": _cluster(),
        "minutes": HEALTH_MINUTES,
        "poll_seconds": HEALTH_POLL_SECONDS,
    }


def _canaries() -> dict[str, Any]:
    """The canaries in force and the guard's rollbacks of the last day (issue 25)."""
    from policies.rollout.canary import canaries_overview

    try:
        overview = canaries_overview()
    except Exception as exc:  # the dashboard shows what it can
        log.exception("dashboard: the canaries")
        return {"items": [], "trips": [], "error": f"The canaries cannot be read: {exc}"[:300]}
    for trip in overview["trips"]:
        trip["words"] = guard_words(trip["detail"])
    return overview


@page_access(roles={"GET": "viewer"})
def dashboard(request: HttpRequest) -> HttpResponse:
    """The landing page: what serves, what the cluster looks like, how the extender does."""
    context = {
        "policies": _section(active_policies, what="the active policies"),
        "health": health_context(),
        "decisions": _section(
            lambda: [decision_summary(decision=d) for d in selectors.decision_list()[:RECENT]],
            what="recent decisions",
        ),
        "audit": _section(
            lambda: [audit_row(event=e) for e in selectors.audit_list()[:RECENT]],
            what="the audit log",
        ),
        "shadows": _section(
            lambda: shadows_overview(since=timezone.now() - timedelta(hours=1)),
            what="the shadow versions",
        ),
        "canaries": _canaries(),
    }
    return render_page(request, "ops/dashboard.html", context)


@page_access(roles={"GET": "viewer"})
def dashboard_health(request: HttpRequest) -> HttpResponse:
    """The health card alone, for htmx polling (always 200: its sentences carry the trouble)."""
    return render_page(request, "ops/_health.html", {"health": health_context()})


# --- connect ------------------------------------------------------------------------------------

# A Kubernetes schedulerName is a DNS-1123 subdomain: lower-case alphanumerics, '-' and '.',
# starting and ending alphanumeric, at most 253 characters.
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
MAX_SCHEDULER_NAMES = 10
CONNECT_TABS = ("profile", "resource", "manifests", "webhook", "rbac")
DEFAULT_LEASE = "kube-scheduler"  # the lease kube-scheduler's own RBAC role is limited to


class ConnectForm(forms.Form):
    """The options of the generated configuration; the defaults suit most installations."""

    url = forms.CharField(
        required=False,
        max_length=MAX_URL_LENGTH,
        label="Extender URL",
        help_text="urlPrefix as kube-scheduler reaches the extender. Empty: SCHEDWEB_EXTENDER_URL.",
    )

    scheduler_names = forms.CharField(
        required=False,
        max_length=1000,
        label="Scheduler names",
        help_text="Comma-separated profile names. Empty: the active policies' names.",
    )
    weight = forms.IntegerField(
        min_value=1,
        max_value=100,
        initial=1,
        help_text="The extender's 0-10 score times weight times 10 joins the plugins' scores.",
    )
    ignorable = forms.BooleanField(
        required=False,
        label="Ignorable (fail open)",
        help_text="Scheduling goes on without schedweb when it does not answer.",
    )
    node_cache_capable = forms.BooleanField(
        required=False,
        initial=True,
        label="nodeCacheCapable",
        help_text="Send node names only (recommended: bodies 200x smaller).",
    )
    bind = forms.BooleanField(
        required=False,
        label="Bind through schedweb",
        help_text="schedweb creates pods/binding; at most one extender may bind.",
    )
    # The output tab on show, so that a re-render (and a shared link) keeps it.
    tab = forms.ChoiceField(required=False, choices=[(t, t) for t in CONNECT_TABS])

    namespace = forms.CharField(
        required=False,
        max_length=63,
        label="Second scheduler's namespace",
        help_text="Where its Deployment, ServiceAccount, ConfigMap and lease go. Empty: kube-system.",
    )

    def clean_namespace(self) -> str:
        namespace = self.cleaned_data["namespace"].strip()
        if namespace and not _DNS_LABEL.fullmatch(namespace):
            raise forms.ValidationError(
                f"{namespace!r} is not a namespace name: lower-case letters, digits and '-', "
                "starting and ending with a letter or digit"
            )
        return namespace

    def clean_url(self) -> str:
        url = self.cleaned_data["url"].strip()
        if url and (problem := extender_url_problem(url)):
            raise forms.ValidationError(f"Not an extender URL: {problem}.")
        return url

    def clean_scheduler_names(self) -> list[str]:
        names: list[str] = []
        for raw in self.cleaned_data["scheduler_names"].split(","):
            name = raw.strip()
            if not name:
                continue
            if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
                raise forms.ValidationError(
                    f"{name[:60]!r} is not a valid schedulerName: use lower-case letters, digits, "
                    "'-' and '.', starting and ending with a letter or digit"
                )
            if name not in names:
                names.append(name)
        if len(names) > MAX_SCHEDULER_NAMES:
            raise forms.ValidationError(f"at most {MAX_SCHEDULER_NAMES} scheduler names")
        return names


def _cli(*, names: list[str], data: dict[str, Any], extra: str = "") -> str:
    """The `schedulerconfig` command line that prints the same configuration."""
    parts = ["python manage.py schedulerconfig"]
    if data.get("url") and data["url"] != settings.SCHEDWEB_EXTENDER_URL:
        parts.append(f"--url {shlex.quote(data['url'])}")
    parts += [f"--scheduler-name {n}" for n in names]
    if extra:
        parts.append(extra)
    if data["weight"] != 1:
        parts.append(f"--weight {data['weight']}")
    if data["ignorable"]:
        parts.append("--ignorable")
    if not data["node_cache_capable"]:
        parts.append("--full-nodes")
    if data["bind"]:
        parts.append("--bind")
    return " ".join(parts)


def connect_outputs(*, data: dict[str, Any]) -> dict[str, Any]:
    """Generated YAML for both scopings, the second scheduler and the extender's RBAC."""
    names = data["scheduler_names"] or selectors.scheduler_names_active() or ["schedweb"]
    url = data.get("url") or settings.SCHEDWEB_EXTENDER_URL
    common = {
        "extender_url": url,
        "scheduler_names": tuple(names),
        "ignorable": data["ignorable"],
        "node_cache_capable": data["node_cache_capable"],
        "weight": data["weight"],
        "bind": data["bind"],
        "tls_ca_file": settings.SCHEDWEB_EXTENDER_SCHEDULER_CA,
        "tls_cert_file": settings.SCHEDWEB_EXTENDER_SCHEDULER_CERT,
        "tls_key_file": settings.SCHEDWEB_EXTENDER_SCHEDULER_KEY,
    }
    # Profiles and managedResources extend the cluster's own scheduler (default-scheduler kept,
    # its kubeconfig): it must keep its lease, the only one system:kube-scheduler may update.
    profile = SchedulerSetup(**common, scoping="profile", lease_name=DEFAULT_LEASE)
    resource = SchedulerSetup(**common, scoping="resource", lease_name=DEFAULT_LEASE)
    # A pod cannot reach schedweb at its own loopback address: unless one was typed in, the
    # second scheduler's manifests name the chart's extender Service instead (and say so).
    loopback = url if url_is_loopback(url) else ""
    manifests_url = IN_CLUSTER_EXTENDER_URL if loopback and not data.get("url") else url
    namespace = data.get("namespace") or "kube-system"
    second = SchedulerSetup(
        **{**common, "extender_url": manifests_url},
        scoping="profile",
        keep_default_profile=False,
        namespace=namespace,
    )
    webhook = _queue_webhook(url)
    return {
        "names": names,
        "url": url,
        "urls": extender_urls(prefix=url),
        "https": url.startswith("https://"),
        "profile": _config_or_why_not(profile),
        "resource": dump_yaml(scheduler_configuration(resource)),
        "manifests": second_scheduler_yaml(second),
        "manifests_url": manifests_url,
        "manifests_loopback": loopback,
        "namespace": namespace,
        "rbac": dump_yaml(schedweb_rbac(bind=data["bind"], queue=bool(webhook["policies"]))),
        "webhook": webhook,
        "managed_resource": MANAGED_RESOURCE,
        "opt_in_pod": dump_yaml(_opt_in_pod(names[0])),
        "cli_profile": _cli(names=names, data=data, extra=""),
        "cli_resource": _cli(names=names, data=data, extra="--scoping resource"),
        "cli_manifests": _cli(
            names=names,
            data={**data, "url": manifests_url},
            extra="--manifests"
            + (f" --namespace {data['namespace']}" if data.get("namespace") else ""),
        ),
        "cli_rbac": rbac_command(bind=data["bind"], queue=bool(webhook["policies"])),
    }


def _queue_webhook(url: str) -> dict[str, Any]:
    """The queue webhook's configuration (active policies with `queue:`), and the admission
    configuration that gives kube-apiserver its client certificate (mutual TLS)."""
    from policies.queue_classes import queue_policies_active

    policies = queue_policies_active()
    ca_file = settings.SCHEDWEB_EXTENDER_SCHEDULER_CA
    try:
        ca = Path(ca_file).read_text() if ca_file else ""
    except OSError:
        ca = ""
    return {
        "policies": [p.name for p in policies],
        "config": dump_yaml(
            queue_webhook_configuration(extender_url=url, policies=policies, ca_bundle=ca)
        )
        if policies
        else "",
        "admission": webhook_admission_configuration(
            webhook_url=webhook_url(url),
            cert_file="/etc/kubernetes/pki/schedweb-webhook-client.crt",
            key_file="/etc/kubernetes/pki/schedweb-webhook-client.key",
        ),
        "url": webhook_url(url),
    }


def _config_or_why_not(setup: SchedulerSetup) -> str:
    """The configuration's YAML; with bind on and a profile no policy targets, why there is none
    (as a YAML comment, where the configuration would be)."""
    try:
        return dump_yaml(scheduler_configuration(setup))
    except BindScopeError as exc:
        return "".join(
            f"# {line}\n" for line in textwrap.wrap(str(exc), 96, break_on_hyphens=False)
        )


def _opt_in_pod(scheduler_name: str) -> dict[str, Any]:
    """How a pod opts in under resource scoping: its schedulerName plus the managed resource."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "example"},
        "spec": {
            "schedulerName": scheduler_name,
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example.com/app:1.0",
                    "resources": {"limits": {MANAGED_RESOURCE: "1"}},
                }
            ],
        },
    }


@page_access(roles={"GET": "viewer"})
def connect(request: HttpRequest) -> HttpResponse:
    """How to point kube-scheduler here; htmx re-renders the options and outputs together."""
    bound = "weight" in request.GET  # the form always sends weight; a plain visit gets defaults
    form = (
        ConnectForm(request.GET)
        if bound
        else ConnectForm(initial={"weight": 1, "bind": settings.SCHEDWEB_EXTENDER_BIND})
    )
    status = 200
    if not bound:
        data = {
            "scheduler_names": [],
            "weight": 1,
            "ignorable": False,
            "node_cache_capable": True,
            "bind": settings.SCHEDWEB_EXTENDER_BIND,
        }
    elif form.is_valid():
        data = form.cleaned_data
    else:
        data, status = None, 422  # 422: htmx swaps it in (base.html), the errors show at fields
    tab = request.GET.get("tab", "")
    context = {
        "form": form,
        "out": connect_outputs(data=data) if data is not None else None,
        "active_names": selectors.scheduler_names_active(),
        "tab": tab if tab in CONNECT_TABS else CONNECT_TABS[0],
        "sp": scheduler_profile_context(),
        "default_url": settings.SCHEDWEB_EXTENDER_URL,
    }
    template = "ops/_connect.html" if request.headers.get("HX-Request") else "ops/connect.html"
    return render_page(request, template, context, status=status)


# --- the scheduler configuration the previews model ----------------------------------------


def scheduler_profile_context(
    *, text: str | None = None, errors: list[dict[str, str]] | None = None, saved: bool = False
) -> dict[str, Any]:
    """The Connect page's "previews model" card: the stored configuration (or `text` being
    fixed), what the model reads from it, and every field error."""
    stored = selectors.scheduler_profile_text()
    profile = profile_active()
    return {
        "text": stored if text is None else text,
        "default": not stored,
        "errors": errors or [],
        "saved": saved,
        "extender_weight": profile.extender_weight,
        "strategy": profile.strategy,
        "weights": [(name, profile.score_weight(name)) for name in SCORE_PLUGINS],
        "disabled": sorted(profile.disabled),
    }


@page_access(roles={"POST": "admin"})
def connect_scheduler_profile(request: HttpRequest) -> HttpResponse:
    """Store the KubeSchedulerConfiguration every preview models (empty: the default one);
    422 with every field error when the model cannot run it."""
    text = request.POST.get("text", "")
    try:
        services.scheduler_profile_set(actor=request.user, text=text)
    except InputError as exc:
        context = {"sp": scheduler_profile_context(text=text, errors=exc.details)}
        return render_page(request, "ops/_scheduler_profile.html", context, status=422)
    context = {"sp": scheduler_profile_context(saved=True)}
    return render_page(request, "ops/_scheduler_profile.html", context)
