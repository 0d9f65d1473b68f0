"""Writes of a shadow's life after its publish: promote it to active, or discard it; and the
model's kube-scheduler pick under each version, added to recent shadow records.

Promote and discard run under the publishing lock in one transaction with their audit row, distribute the
active set after commit and wait for every extender process to serve it, like publish
(policies/services.py).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from policies.engine.document import FieldError, PolicyInvalid
from policies.errors import Conflict, InputError, ServiceError, TestsFailed
from policies.evaluation import policy_compile, test_cases_run
from policies.models import Policy, PolicyActivation
from policies.publishing import ServedReport
from policies.services import (
    RollbackResult,
    _activate,
    _audit,
    _check_scheduler_names,
    _distribute_after_commit,
    _lock_publishing,
    _shadow_end,
    _shadow_in_force,
)

MAX_MESSAGE = 2000


def _message(message: str, *, required: bool) -> str:
    message = (message or "").strip()
    if required and not message:
        raise ServiceError(
            "a message is required: say why the shadow is promoted",
            details=[FieldError("message", "required").to_dict()],
        )
    if len(message) > MAX_MESSAGE:
        raise ServiceError(
            f"the message is longer than {MAX_MESSAGE} characters",
            details=[FieldError("message", f"at most {MAX_MESSAGE} characters").to_dict()],
        )
    return message


def _rollout_or_conflict(
    policy: Policy,
    *,
    role: str = PolicyActivation.Role.SHADOW,
    expect_version: int | None = None,
    absent: str = "has no shadow version",
    hint: str = "",
) -> PolicyActivation:
    """The policy's shadow (or canary, by `role`) in force; a Conflict without one, or when it
    is not `expect_version` (the one the caller reviewed: another replaced it meanwhile)."""
    found = _shadow_in_force(policy=policy, role=role)
    if found is None:
        raise Conflict(f"policy {policy.name} {absent}")
    number = found.version.number
    if expect_version is not None and number != expect_version:
        raise Conflict(
            f"the {role} of {policy.name} is version {number} now, not {expect_version}{hint}"
        )
    return found


def policy_shadow_promote(
    *, actor, policy: Policy, message: str, cluster=None, expect_version: int | None = None
) -> RollbackResult:
    """The shadow becomes the active version (reason `promote`), through publish's gate: it
    must compile and pass the policy's test cases as they are now; the message is required.
    `expect_version`: the shadow version the promoter reviewed (a Conflict when another
    shadow replaced it meanwhile)."""
    message = _message(message, required=True)
    with transaction.atomic():
        _lock_publishing()
        locked = Policy.objects.select_for_update().get(pk=policy.pk)
        shadow = _rollout_or_conflict(
            locked, expect_version=expect_version, hint="; review the report again"
        )
        version = shadow.version
        try:
            compiled = policy_compile(version.document)
        except PolicyInvalid as exc:
            raise Conflict(
                f"shadow version {version.number} no longer compiles: {exc}",
                details=[e.to_dict() for e in exc.errors],
            ) from None
        results = test_cases_run(compiled=compiled, stored=locked.test_cases.all(), cluster=cluster)
        failed = [r for r in results if not r["passed"]]
        if failed:
            raise TestsFailed(
                f"{len(failed)} of {len(results)} test case{'s' if len(results) != 1 else ''} "
                "failed on the shadow version; nothing was promoted",
                details=results,
            )
        activation, distribution = _promote(
            actor=actor,
            policy=locked,
            version=version,
            role=PolicyActivation.Role.SHADOW,
            action="policy.promote",
            message=message,
            tests=len(results),
        )
    return RollbackResult(activation=activation, served=distribution.served())


def _promote(
    *, actor, policy: Policy, version, role: str, action: str, **detail: Any
) -> tuple[PolicyActivation, Any]:
    """A shadow's or a canary's `version` becomes the active version (reason `promote`): its
    role ends, the audit row `action` names the version it replaced. Under the publishing lock,
    in the caller's transaction; returns the activation and the distribution, whose served()
    the caller waits for once the transaction committed."""
    _check_scheduler_names(policy=policy, names=version.scheduler_names)
    current = _shadow_in_force(policy=policy, role=PolicyActivation.Role.ACTIVE)
    _shadow_end(actor=actor, policy=policy, why="promoted", role=role)
    activation = _activate(
        actor=actor, policy=policy, version=version, reason=PolicyActivation.Reason.PROMOTE
    )
    _audit(
        actor=actor,
        action=action,
        policy_name=policy.name,
        version=version.number,
        previous=current.version.number if current else None,
        **detail,
    )
    return activation, _distribute_after_commit()


def policy_shadow_discard(*, actor, policy: Policy, message: str = "") -> ServedReport:
    """Ends the shadow (its records stay until pruned); `message`, why, is optional."""
    message = _message(message, required=False)
    with transaction.atomic():
        _lock_publishing()
        locked = Policy.objects.select_for_update().get(pk=policy.pk)
        _rollout_or_conflict(locked)
        _shadow_end(actor=actor, policy=locked, why="discarded", message=message)
        distribution = _distribute_after_commit()
    return distribution.served()


# --- kube-scheduler's pick under each version, from the model --------------------------------

# Records given a pick per run (beat, every 30 s: schedweb.shadow_picks): two model cycles each over
# the record's candidates (about 20-60 ms at 500 nodes on a loaded core), so at most about a
# second of the worker's time per run. Older or further records are left without one.
PICKS_PER_RUN = 10
PICKS_WINDOW = timedelta(minutes=10)
_PICKED = ("nodes", "moved", "rejected")


def shadow_picks_fill(*, cluster, limit: int = PICKS_PER_RUN) -> int:
    """kube-scheduler's pick under the active and under the shadow version, from the model of
    its profile (as previews compute it), for the newest shadow records that kept their node
    breakdowns and have no pick yet: over the candidates the record names, in `cluster`'s
    snapshot as it is when this runs (seconds after the answer: the pods bound since are in
    it). Stored as the record's shadow.pick {active, shadow, differs}; returns how many.

    `cluster` may be a function giving it, called only when a record awaits its pick: the
    worker's live snapshot catches up on every change since the last run when read (0.05-1 s
    every 5 s in bench shadow's churn), which a run with nothing to fill does not need."""
    from policies.cluster.manifest import pod_view_from_object
    from policies.evaluation import placement_from_cycle, profile_active
    from policies.models import Decision, PolicyVersion
    from policies.schedmodel.pipeline import cycle_run

    state = None
    rows = Decision.objects.filter(
        role="shadow",
        shadow_outcome__in=_PICKED,
        created_at__gte=timezone.now() - PICKS_WINDOW,
    ).exclude(pod_manifest="")
    filled = 0
    compiled: dict[tuple[str, int], Any] = {}
    for row in rows.order_by("-created_at", "-pk")[: limit * 5]:
        if filled >= limit:
            break
        data = row.nodes if isinstance(row.nodes, dict) else {}
        shadow = data.get("shadow")
        if not isinstance(shadow, dict) or "pick" in shadow or not data.get("nodes"):
            continue
        if state is None:
            state = (cluster() if callable(cluster) else cluster).state
        nodes = [state.node(n.get("n", "")) for n in data["nodes"] if isinstance(n, dict)]
        nodes = [n for n in nodes if n is not None]
        try:
            pod = pod_view_from_object(json.loads(row.pod_manifest))
            picks = {}
            for side, number in (
                ("active", shadow.get("activeVersion")),
                ("shadow", row.policy_version),
            ):
                key = (row.policy_name, int(number))
                if key not in compiled:
                    document = (
                        PolicyVersion.objects.filter(policy__name=key[0], number=key[1])
                        .values_list("document", flat=True)
                        .first()
                    )
                    compiled[key] = policy_compile(document) if document else None
                policy = compiled[key]
                if policy is None:
                    raise LookupError(f"{key[0]} v{key[1]} is gone")
                cycle = cycle_run(
                    pod=pod,
                    nodes=nodes,
                    state=state,
                    policy=policy,
                    profile=profile_active(scheduler_name=pod.get("schedulerName")),
                )
                picks[side] = sorted(
                    placement_from_cycle(cycle, applies=policy.applies_to(pod)).pick
                )
        except (LookupError, ValueError, TypeError, InputError, PolicyInvalid) as exc:
            shadow["pick"] = {"error": str(exc)[:300]}
        else:
            shadow["pick"] = {
                "active": picks["active"][:64],
                "shadow": picks["shadow"][:64],
                "differs": picks["active"] != picks["shadow"],
            }
        Decision.objects.filter(pk=row.pk).update(nodes=data)
        filled += 1
    return filled
