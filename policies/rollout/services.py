"""Writes of a shadow's life after its publish: promote it to active, or discard it.

Both run under the publishing lock in one transaction with their audit row, distribute the
active set after commit and wait for every extender process to serve it, like publish
(policies/services.py).
"""

from __future__ import annotations

from django.db import transaction

from policies.engine.document import FieldError, PolicyInvalid
from policies.errors import Conflict, ServiceError, TestsFailed
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


def _shadow_or_conflict(policy: Policy) -> PolicyActivation:
    shadow = _shadow_in_force(policy=policy)
    if shadow is None:
        raise Conflict(f"policy {policy.name} has no shadow version")
    return shadow


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
        shadow = _shadow_or_conflict(locked)
        version = shadow.version
        if expect_version is not None and version.number != expect_version:
            raise Conflict(
                f"the shadow of {policy.name} is version {version.number} now, not "
                f"{expect_version}; review the report again"
            )
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
        _check_scheduler_names(policy=locked, names=version.scheduler_names)
        current = (
            PolicyActivation.objects.filter(
                policy=locked, active=True, role=PolicyActivation.Role.ACTIVE
            )
            .select_related("version")
            .first()
        )
        _shadow_end(actor=actor, policy=locked, why="promoted")
        activation = _activate(
            actor=actor, policy=locked, version=version, reason=PolicyActivation.Reason.PROMOTE
        )
        _audit(
            actor=actor,
            action="policy.promote",
            policy_name=locked.name,
            version=version.number,
            previous=current.version.number if current else None,
            message=message,
            tests=len(results),
        )
        distribution = _distribute_after_commit()
    return RollbackResult(activation=activation, served=distribution.served())


def policy_shadow_discard(*, actor, policy: Policy, message: str = "") -> ServedReport:
    """Ends the shadow (its records stay until pruned); `message`, why, is optional."""
    message = _message(message, required=False)
    with transaction.atomic():
        _lock_publishing()
        locked = Policy.objects.select_for_update().get(pk=policy.pk)
        _shadow_or_conflict(locked)
        _shadow_end(actor=actor, policy=locked, why="discarded", message=message)
        distribution = _distribute_after_commit()
    return distribution.served()
