"""A canary's life after its publish (issue 25, item 3): its rollout checked from the
publisher's input, promoted to 100% (the active version) or aborted (back to the stable one).

Publishing one is `policies.services.policy_publish(canary=canary_rollout(...))`: the publish
path, its gate and its served confirmation. Promote and abort run under the publishing lock in
one transaction with their audit row and return once every extender process serves the result,
like publish.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson
from django.db import transaction

from policies.engine.document import FieldError
from policies.errors import Conflict, ServiceError
from policies.models import Policy, PolicyActivation
from policies.publishing import ServedReport
from policies.services import (
    RollbackResult,
    _distribute_after_commit,
    _lock_publishing,
    _shadow_end,
    _shadow_in_force,
)

from .guard import TRIPPED, rates, totals_read
from .services import _message, _promote, _rollout_or_conflict
from .split import SelectorInvalid, selector_parse

CANARY = PolicyActivation.Role.CANARY
# The guard's defaults: the canary is rolled back once it has judged MIN_PODS pods and its rate
# of pods rejected on every node (or of evaluation errors) is RATE points above the stable
# version's over the same window.
DEFAULT_GUARD = {"rejectedRate": 5.0, "errorRate": 5.0, "minPods": 20}
MAX_MIN_PODS = 100_000
MAX_PROMOTE_AFTER = 30 * 86400  # seconds: a quiet period of at most 30 days


def _invalid(path: str, message: str) -> ServiceError:
    return ServiceError(f"{path}: {message}", details=[FieldError(path, message).to_dict()])


def _number(value: Any, path: str, low: float, high: float) -> float:
    """A number in [low, high]; "5%" reads as 5. Booleans, NaN and text are refused."""
    if isinstance(value, str):
        text = value.strip().removesuffix("%").strip()
        try:
            value = float(text)
        except ValueError:
            raise _invalid(path, f"{value[:40]!r} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise _invalid(path, "must be a number")
    if not low <= value <= high:
        raise _invalid(path, f"must be between {low:g} and {high:g}")
    return float(value)


def canary_rollout(
    *,
    percent: Any = None,
    selector: Any = None,
    guard: dict[str, Any] | None = None,
    promote_after: Any = None,
) -> dict[str, Any]:
    """The stored rollout of a canary publish, from the publisher's input, or a ServiceError
    (400) naming the field (`canary.percent`, `canary.selector`, `canary.guard.rejectedRate`,
    ...): a share of 1-99% or a non-empty label selector (exactly one), guard rates of 0-100
    points, a minimum of 1-100000 judged pods, a quiet period of 60 s to 30 days."""
    if (percent is None) == (selector is None):
        raise _invalid("canary", "give a percent (1-99) or a selector, exactly one")
    if selector is not None:
        try:
            selector_parse(selector)
        except SelectorInvalid as exc:
            raise _invalid("canary.selector", str(exc)) from None
        share: dict[str, Any] = {"selector": selector.strip()}
    else:
        share = {"percent": _number(percent, "canary.percent", 1, 99)}
    guard = {} if guard is None else guard
    if not isinstance(guard, dict):
        raise _invalid("canary.guard", "must be an object")
    unknown = sorted(set(guard) - set(DEFAULT_GUARD))
    if unknown:
        raise _invalid(f"canary.guard.{str(unknown[0])[:40]}", "unknown field")
    checked = dict(DEFAULT_GUARD)
    for key in ("rejectedRate", "errorRate"):
        if guard.get(key) is not None:
            checked[key] = _number(guard[key], f"canary.guard.{key}", 0, 100)
    if guard.get("minPods") is not None:
        pods = _number(guard["minPods"], "canary.guard.minPods", 1, MAX_MIN_PODS)
        if pods != int(pods):
            raise _invalid("canary.guard.minPods", "must be a whole number")
        checked["minPods"] = int(pods)
    rollout: dict[str, Any] = {"share": share, "guard": checked}
    if promote_after is not None:
        rollout["promoteAfterSeconds"] = int(
            _number(promote_after, "canary.promoteAfterSeconds", 60, MAX_PROMOTE_AFTER)
        )
    return rollout


def _canary_or_conflict(policy: Policy, expect_version: int | None = None) -> PolicyActivation:
    return _rollout_or_conflict(
        policy, role=CANARY, expect_version=expect_version, absent="has no canary in flight"
    )


def policy_canary_promote(
    *, actor, policy: Policy, message: str = "", expect_version: int | None = None, why: str = ""
) -> RollbackResult:
    """The canary decides every pod: it becomes the active version (reason `promote`). It
    passed publish's gate when it was published and has decided real pods since, so the gate is
    not run again. `why`: "quiet" when the quiet period promoted it (the actor is the guard)."""
    message = _message(message, required=False)
    with transaction.atomic():
        _lock_publishing()
        locked = Policy.objects.select_for_update().get(pk=policy.pk)
        activation, distribution = _promote(
            actor=actor,
            policy=locked,
            version=_canary_or_conflict(locked, expect_version).version,
            role=CANARY,
            action="policy.canary_promote",
            **({"message": message} if message else {}),
            **({"why": why} if why else {}),
        )
    return RollbackResult(activation=activation, served=distribution.served())


def policy_canary_abort(
    *, actor, policy: Policy, message: str = "", why: str = "aborted", **detail: Any
) -> ServedReport:
    """Back to the stable version for every pod: the canary ends (audited; `why`: aborted by
    hand, or guard with the guard's figures in `detail`). kube-scheduler retries the pods the
    canary left unschedulable, and the stable version judges them."""
    message = _message(message, required=False)
    with transaction.atomic():
        _lock_publishing()
        locked = Policy.objects.select_for_update().get(pk=policy.pk)
        _canary_or_conflict(locked)
        _shadow_end(actor=actor, policy=locked, why=why, message=message, role=CANARY, **detail)
        distribution = _distribute_after_commit()
    return distribution.served()


# --- the guard's and the quiet period's side, in the worker ------------------------------------

# The audit rows' actor when the product acts by itself (actor_name "guard", no user).
GUARD = SimpleNamespace(username="guard", pk=None)


def _trip_read(client, name: str, version: int) -> dict[str, Any] | None:
    raw = client.get(TRIPPED.format(policy=name, version=version))
    return orjson.loads(raw) if raw else None


def canary_guard_rollback(*, name: str, version: int, client=None) -> bool:
    """Rolls canary `version` of policy `name` back because an extender process saw it trip its
    guard (the figures it saw are in Redis): audited with the guard as actor and the figures.
    False when that canary is no longer in force (promoted, aborted, replaced)."""
    from policies.redis import redis_client

    client = client or redis_client()
    why = _trip_read(client, name, version)
    policy = Policy.objects.filter(name=name).first()
    canary = _shadow_in_force(policy=policy, role=CANARY) if policy else None
    if why is None or canary is None or canary.version.number != version:
        return False
    try:
        policy_canary_abort(
            actor=GUARD,
            policy=policy,
            why="guard",
            reason=why.get("reason", ""),
            canary=why.get("canary"),
            stable=why.get("stable"),
            threshold=why.get("threshold"),
        )
    except Conflict:  # ended meanwhile by hand
        return False
    return True


def canary_check(*, now=None, client=None) -> dict[str, int]:
    """The worker's periodic pass over the canaries in force: one whose trip no queued rollback
    has acted on yet is rolled back (the queue lost it, or the worker was down), and one quiet
    for its promoteAfterSeconds (no trip) is promoted, audited with the guard as actor."""
    from django.utils import timezone

    from policies.redis import redis_client

    client = client or redis_client()
    now = now or timezone.now()
    done = {"rolledBack": 0, "promoted": 0}
    canaries = PolicyActivation.objects.filter(active=True, role=CANARY).select_related(
        "policy", "version"
    )
    for canary in canaries:
        name, version = canary.policy.name, canary.version.number
        if _trip_read(client, name, version) is not None:
            done["rolledBack"] += canary_guard_rollback(name=name, version=version, client=client)
            continue
        after = (canary.rollout or {}).get("promoteAfterSeconds")
        if after and (now - canary.activated_at).total_seconds() >= after:
            try:
                policy_canary_promote(
                    actor=GUARD, policy=canary.policy, expect_version=version, why="quiet"
                )
            except Conflict:
                continue
            done["promoted"] += 1
    return done


def canary_from_request(raw: Any) -> dict[str, Any] | None:
    """A publish request's `canary` object ({percent | selector, guard?, promoteAfterSeconds?})
    as canary_rollout checks it; None when absent."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _invalid("canary", "must be an object")
    unknown = sorted(set(raw) - {"percent", "selector", "guard", "promoteAfterSeconds"})
    if unknown:
        raise _invalid(f"canary.{str(unknown[0])[:40]}", "unknown field")
    return canary_rollout(
        percent=raw.get("percent"),
        selector=raw.get("selector"),
        guard=raw.get("guard"),
        promote_after=raw.get("promoteAfterSeconds"),
    )


def canary_status(*, policy: Policy, client=None) -> dict[str, Any] | None:
    """The canary in force as the REST API, the pages and the CLI say it: its version and the
    stable one, share, guard, quiet period, since when, and how each arm is doing (the counts
    every extender process added, policies/rollout/guard.py); None without one."""
    from policies.redis import redis_client

    canary = _shadow_in_force(policy=policy, role=CANARY)
    if canary is None:
        return None
    stable = _shadow_in_force(policy=policy, role=PolicyActivation.Role.ACTIVE)
    rollout = canary.rollout or {}
    try:
        client = client or redis_client()
        arms = rates(totals_read(client, policy.name, canary.version.number))
        tripped = _trip_read(client, policy.name, canary.version.number)
    except Exception:  # Redis down: the status without the counts
        arms, tripped = None, None
    return {
        "version": canary.version.number,
        "stable": stable.version.number if stable else None,
        "message": canary.version.message,
        "schedulerNames": canary.version.scheduler_names,
        "share": rollout.get("share") or {},
        "guard": rollout.get("guard") or {},
        "promoteAfterSeconds": rollout.get("promoteAfterSeconds"),
        "since": canary.activated_at.isoformat(),
        "by": canary.activated_by.get_username() if canary.activated_by else None,
        "arms": arms,
        "tripped": tripped,
    }


def canary_last_rollback(*, policy: Policy) -> dict[str, Any] | None:
    """The guard's last rollback of this policy's canary, for the notice on the dashboard and
    the policy page: the audit row's version, time and figures; None when it never acted."""
    from policies.models import AuditEvent

    event = (
        AuditEvent.objects.filter(
            action="policy.canary_abort", policy_name=policy.name, detail__why="guard"
        )
        .order_by("-pk")
        .first()
    )
    if event is None:
        return None
    return {
        "version": event.version,
        "at": event.created_at.isoformat(),
        "by": event.actor_name,
        **event.detail,
    }


def canary_words(status: dict[str, Any]) -> dict[str, Any]:
    """A canary status as the pages show it: the share and each arm's figures in words."""
    share = status.get("share") or {}
    if share.get("selector"):
        share_text = f"pods matching {share['selector']}"
    else:
        share_text = f"{share.get('percent', 0):g}% of pods"
    guard = status.get("guard") or {}
    return {
        **status,
        "shareText": share_text,
        "guardText": (
            f"rolled back when {guard.get('rejectedRate', '?'):g} points more of its pods are "
            f"rejected everywhere, or {guard.get('errorRate', '?'):g} more error, than the "
            f"stable version's, after {guard.get('minPods', '?')} pods"
            if guard
            else ""
        ),
    }


def canaries_overview(*, client=None) -> dict[str, Any]:
    """Every canary in force and the guard's rollbacks of the last day, for the dashboard."""
    from datetime import timedelta

    from django.utils import timezone

    from policies.models import AuditEvent

    rows = []
    for canary in (
        PolicyActivation.objects.filter(active=True, role=CANARY)
        .select_related("policy")
        .order_by("policy__name")
    ):
        status = canary_status(policy=canary.policy, client=client)
        if status is not None:
            rows.append({"policy": canary.policy.name, **canary_words(status)})
    trips = [
        {"policy": e.policy_name, "version": e.version, "at": e.created_at, "detail": e.detail}
        for e in AuditEvent.objects.filter(
            action="policy.canary_abort",
            detail__why="guard",
            created_at__gte=timezone.now() - timedelta(days=1),
        ).order_by("-pk")[:10]
    ]
    return {"items": rows, "trips": trips}
