"""Reads: policies, versions, activations, audit events and decisions from the database.

Only ORM reads live here (writes are in services.py; clusters, compiling and previews in
policies/cluster/ and policies/evaluation.py). Each is a keyword-only `<noun>_<verb>` function;
a missing row is NotFound (policies/errors.py), which the API and the pages map.
"""

from __future__ import annotations

import difflib
from typing import Any

import yaml
from django.db.models import Max, OuterRef, Q, Subquery

from policies.engine.compare import rule_changes
from policies.errors import NotFound
from policies.models import (
    AuditEvent,
    Decision,
    Policy,
    PolicyActivation,
    PolicyVersion,
    SchedulerProfile,
    SharedPreview,
)

# --- policies, versions, audit ----------------------------------------------------------------


def policy_get_active(*, policy) -> Any:
    """The active PolicyVersion of `policy`, or None."""

    activation = (
        PolicyActivation.objects.filter(policy=policy, active=True, role="active")
        .select_related("version")
        .first()
    )
    return activation.version if activation else None


def policy_list(*, search: str = "", active: bool | None = None, scheduler_name: str = ""):
    """Policies with their active and latest version numbers annotated."""

    active_number = PolicyActivation.objects.filter(
        policy=OuterRef("pk"), active=True, role="active"
    ).values("version__number")[:1]
    queryset = Policy.objects.select_related("owner").annotate(
        active_number=Subquery(active_number), latest_number=Max("versions__number")
    )
    if search:
        queryset = queryset.filter(Q(name__icontains=search) | Q(description__icontains=search))
    if active is not None:
        queryset = queryset.filter(active_number__isnull=not active)
    if scheduler_name:
        ids = [
            a.policy_id
            for a in PolicyActivation.objects.filter(active=True, role="active").select_related(
                "version"
            )
            if scheduler_name in a.version.scheduler_names
        ]
        queryset = queryset.filter(pk__in=ids)
    return queryset.order_by("name")


def policy_scheduler_names(*, document: str) -> list[str]:
    """schedulerNames of a stored (valid) document, for listings."""
    try:
        data = yaml.safe_load(document)
        return [str(n) for n in data.get("schedulerNames", [])]
    except Exception:  # a stored draft is valid; be tolerant anyway
        return []


def version_diff(*, policy, a: int, b: int) -> dict[str, Any]:
    """Unified text diff of two versions plus which rules were added, removed or changed."""

    versions = {v.number: v for v in PolicyVersion.objects.filter(policy=policy, number__in=[a, b])}
    for number in (a, b):
        if number not in versions:
            raise NotFound(f"policy {policy.name} has no version {number}")
    old, new = versions[a].document, versions[b].document
    unified = "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), f"v{a}", f"v{b}"
        )
    )
    return {"fromVersion": a, "toVersion": b, "unified": unified, "rules": rule_changes(old, new)}


def audit_list(*, policy_name: str = "", action: str = "", actor: str = ""):

    queryset = AuditEvent.objects.all()
    if policy_name:
        queryset = queryset.filter(policy_name=policy_name)
    if action:
        queryset = queryset.filter(action=action)
    if actor:
        queryset = queryset.filter(actor_name=actor)
    return queryset


def policy_export_text(*, policy, text: str) -> str:
    """`text` (the draft or a version of `policy`) with the test cases recorded in schedweb
    added to its `tests:` (those whose name the document does not already use), so a Git
    workflow's `policy test` runs them and an import elsewhere keeps them. A recorded case's
    empty cluster (the current snapshot) is written as `snapshot`."""
    from policies.engine.testcases import expect_canonical
    from policies.engine.tests_section import with_tests

    data = yaml.safe_load(text) or {}
    taken = {t.get("name") for t in data.get("tests") or [] if isinstance(t, dict)}
    cases = [
        {
            "name": case.name,
            "pod": yaml.safe_load(case.pod),
            "cluster": case.cluster or "snapshot",
            "expect": expect_canonical(case.expect),
        }
        for case in policy.test_cases.order_by("name")
        if case.name not in taken
    ]
    return with_tests(text, cases)


def share_get(*, token: str) -> SharedPreview:
    """An unexpired share link; NotFound (one sentence for unknown and expired alike)."""
    from django.utils import timezone

    share = (
        SharedPreview.objects.select_related("policy", "created_by")
        .filter(token=token[:32], expires_at__gt=timezone.now())
        .first()
    )
    if share is None:
        raise NotFound("this share link does not exist or has expired")
    return share


def scheduler_name_conflict(*, policy, names: list[str]) -> dict[str, Any] | None:
    """The active policy (other than `policy`) already serving one of `names`, as
    {"policy", "version", "schedulerNames"} (the overlap), or None: one active policy per
    schedulerName, checked at review and again under the publishing lock."""
    others = (
        PolicyActivation.objects.filter(active=True, role="active")
        .exclude(policy=policy)
        .select_related("policy", "version")
        .order_by("policy__name")
    )
    for activation in others:
        overlap = sorted(set(names) & set(activation.version.scheduler_names))
        if overlap:
            return {
                "policy": activation.policy.name,
                "version": activation.version.number,
                "schedulerNames": overlap,
            }
    return None


def scheduler_names_active() -> list[str]:
    """Every schedulerName served by an active policy version."""

    names: set[str] = set()
    for activation in PolicyActivation.objects.filter(active=True, role="active").select_related(
        "version"
    ):
        names.update(activation.version.scheduler_names)
    return sorted(names)


def decision_list(*, pod: str = "", namespace: str = "", policy: str = "", node: str = ""):
    """Recorded extender decisions (the answering version's; shadow records are the shadow
    report's), newest first, filtered."""

    queryset = Decision.objects.filter(role="active")
    if pod:
        queryset = queryset.filter(pod_name=pod)
    if namespace:
        queryset = queryset.filter(pod_namespace=namespace)
    if policy:
        queryset = queryset.filter(policy_name=policy)
    if node:
        queryset = queryset.filter(chosen_node=node)
    return queryset


def scheduler_profile_text() -> str:
    """The pasted KubeSchedulerConfiguration the previews model ("" = the default one)."""
    return SchedulerProfile.objects.filter(pk=1).values_list("text", flat=True).first() or ""


def policy_version_document(*, policy_name: str, number: int) -> str | None:
    """The document of version `number` of policy `policy_name` (None: no such version)."""
    return (
        PolicyVersion.objects.filter(policy__name=policy_name, number=number)
        .values_list("document", flat=True)
        .first()
    )


def policy_names_serving(*, scheduler_names: list[str]) -> list[str]:
    """Policies any of whose versions serves one of `scheduler_names` (whose recorded decisions
    are about pods of those schedulerNames)."""
    wanted = set(scheduler_names)
    return sorted(
        {
            name
            for name, names in PolicyVersion.objects.values_list(
                "policy__name", "scheduler_names"
            ).distinct()
            if isinstance(names, list) and wanted.intersection(names)
        }
    )


def decisions_recent(*, policy_names: list[str]):
    """Decisions recorded by these policies, newest first (iterate it in chunks: a record holds
    up to 500 nodes)."""
    return Decision.objects.filter(role="active", policy_name__in=policy_names).order_by(
        "-created_at", "-pk"
    )
