"""Reads of shadow versions and their records (issue 25): the report's window, counts and list,
and the dashboard's line per shadow. ORM reads only, like policies/selectors.py."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Sum
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from policies.engine.document import FieldError
from policies.errors import InputError
from policies.models import Decision, PolicyActivation, ShadowTally

# The report's windows; a custom one spans at most MAX_WINDOW (records older than
# SCHEDWEB_DECISIONS_KEEP_DAYS are pruned anyway).
WINDOWS = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(days=7)}
MAX_WINDOW = timedelta(days=31)
# What the list shows: the pods the shadow judged differently (a sample, policies/extender/
# shadow.py); pods judged alike or skipped are counted only.
DIFFERING = ("rejected", "moved", "nodes", "error")
OUTCOMES = ("same", *DIFFERING, "skipped")


@dataclass(frozen=True)
class Window:
    """[since, until) of a report, and how it was asked for (hour, day, week, custom)."""

    name: str
    since: datetime
    until: datetime


def shadow_window(
    *, window: str = "hour", since: str = "", until: str = "", now: datetime | None = None
) -> Window:
    """The report's window: the last hour, day or week, or `custom` between two ISO 8601
    times (with an offset; at most MAX_WINDOW apart). InputError naming each bad field."""
    now = now or timezone.now()
    if window in WINDOWS:
        return Window(window, now - WINDOWS[window], now)
    if window != "custom":
        raise InputError(
            "unknown window",
            details=[FieldError("window", "one of hour, day, week, custom").to_dict()],
        )
    problems, bounds = [], {}
    for field_name, text in (("since", since), ("until", until)):
        value = _instant(text)
        if value is None:
            problems.append(
                FieldError(
                    field_name, "an ISO 8601 time with an offset, e.g. 2026-11-26T05:00:00Z"
                ).to_dict()
            )
        bounds[field_name] = value
    if not problems and bounds["since"] >= bounds["until"]:
        problems.append(FieldError("until", "must be after since").to_dict())
    if not problems and bounds["until"] - bounds["since"] > MAX_WINDOW:
        problems.append(
            FieldError("since", f"at most {MAX_WINDOW.days} days before until").to_dict()
        )
    if problems:
        raise InputError("the report's window is invalid", details=problems)
    return Window("custom", bounds["since"], bounds["until"])


def _instant(text: str) -> datetime | None:
    if not text or len(text) > 64:
        return None
    try:
        value = parse_datetime(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        return None
    if value is None or value.tzinfo is None:
        return None
    return value


def shadow_get(*, policy) -> PolicyActivation | None:
    """The policy's shadow activation in force (with its version), or None."""
    return (
        PolicyActivation.objects.filter(
            policy=policy, active=True, role=PolicyActivation.Role.SHADOW
        )
        .select_related("version", "activated_by")
        .first()
    )


def shadow_records(*, policy_name: str, window: Window, version: int | None = None):
    """The shadow records of `policy_name` (of its shadow `version`, or any) in the window,
    newest first."""
    records = Decision.objects.filter(
        role="shadow",
        policy_name=policy_name,
        created_at__gte=window.since,
        created_at__lt=window.until,
    )
    return records if version is None else records.filter(policy_version=version)


def shadow_summary(
    *, policy_name: str, window: Window, version: int | None = None
) -> dict[str, int]:
    """Counts by outcome in the window, exact (the tallies of every judgement), plus `judged`
    (every outcome but skipped), `differed` (judged, not the same) and `listed` (the pods
    judged differently that have a record of their own: at most
    SCHEDWEB_SHADOW_RECORDS_PER_SECOND a second per process)."""
    tallies = ShadowTally.objects.filter(
        policy_name=policy_name, created_at__gte=window.since, created_at__lt=window.until
    )
    if version is not None:
        tallies = tallies.filter(policy_version=version)
    sums = tallies.aggregate(**{outcome: Sum(outcome) for outcome in OUTCOMES})
    counts = {outcome: sums[outcome] or 0 for outcome in OUTCOMES}
    judged = sum(counts[o] for o in OUTCOMES if o != "skipped")
    listed = (
        shadow_records(policy_name=policy_name, window=window, version=version)
        .filter(shadow_outcome__in=DIFFERING)
        .count()
    )
    return {**counts, "judged": judged, "differed": judged - counts["same"], "listed": listed}


def shadows_overview(*, since: datetime) -> list[dict[str, Any]]:
    """Every shadow in force, for the dashboard: the policy, both versions, the schedulerNames
    it is judged on and its counts since `since`."""
    rows = []
    shadows = PolicyActivation.objects.filter(active=True, role=PolicyActivation.Role.SHADOW)
    actives = {
        a.policy_id: a.version
        for a in PolicyActivation.objects.filter(
            active=True, role=PolicyActivation.Role.ACTIVE
        ).select_related("version")
    }
    window = Window("hour", since, timezone.now() + timedelta(seconds=1))
    for shadow in shadows.select_related("policy", "version").order_by("policy__name"):
        active = actives.get(shadow.policy_id)
        rows.append(
            {
                "policy": shadow.policy.name,
                "version": shadow.version.number,
                "activeVersion": active.number if active else None,
                "schedulerNames": shadow.version.scheduler_names,
                "since": shadow.activated_at,
                "summary": shadow_summary(
                    policy_name=shadow.policy.name, window=window, version=shadow.version.number
                ),
            }
        )
    return rows


def shadow_record_dict(record: Decision, *, nodes: bool = True) -> dict[str, Any]:
    """One shadow record as the report shows it: the pod, both versions, the outcome, the
    difference and (with `nodes`, when kept) both versions' node breakdowns."""
    stored = record.nodes if isinstance(record.nodes, dict) else {}
    shadow = stored.get("shadow") or {}
    data: dict[str, Any] = {
        "id": record.pk,
        "at": record.created_at.isoformat(),
        "pod": {
            "namespace": record.pod_namespace,
            "name": record.pod_name,
            "uid": record.pod_uid,
        },
        "outcome": record.shadow_outcome,
        "shadowVersion": record.policy_version,
        "activeVersion": shadow.get("activeVersion"),
        "candidates": shadow.get("candidates", 0),
        "evalMs": shadow.get("evalMs"),
        "error": shadow.get("error", ""),
        "difference": shadow.get("difference"),
        "chosenNode": record.chosen_node,
        # kube-scheduler's pick under each version, from the model (services.shadow_picks_fill)
        "pick": shadow.get("pick"),
        "breakdowns": bool(stored.get("nodes")),
    }
    if nodes:
        active = shadow.get("active") or {}
        data["nodes"] = {
            "shadow": {k: stored.get(k, []) for k in ("scores", "nodes", "winners")},
            "active": {k: active.get(k, []) for k in ("scores", "nodes", "winners")},
        }
    return data
