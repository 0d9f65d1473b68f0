"""A canary's life after its publish (issue 25, item 3): its rollout checked from the
publisher's input, promoted to 100% (the active version) or aborted (back to the stable one).

Publishing one is `policies.services.policy_publish(canary=canary_rollout(...))`: the publish
path, its gate and its served confirmation. Promote and abort run under the publishing lock in
one transaction with their audit row and return once every extender process serves the result,
like publish.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from policies.engine.document import FieldError
from policies.errors import Conflict, ServiceError
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

from .services import _message
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


def _canary_or_conflict(policy: Policy) -> PolicyActivation:
    canary = _shadow_in_force(policy=policy, role=CANARY)
    if canary is None:
        raise Conflict(f"policy {policy.name} has no canary in flight")
    return canary


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
        canary = _canary_or_conflict(locked)
        version = canary.version
        if expect_version is not None and version.number != expect_version:
            raise Conflict(
                f"the canary of {policy.name} is version {version.number} now, not {expect_version}"
            )
        _check_scheduler_names(policy=locked, names=version.scheduler_names)
        stable = _shadow_in_force(policy=locked, role=PolicyActivation.Role.ACTIVE)
        _shadow_end(actor=actor, policy=locked, why="promoted", role=CANARY)
        activation = _activate(
            actor=actor, policy=locked, version=version, reason=PolicyActivation.Reason.PROMOTE
        )
        _audit(
            actor=actor,
            action="policy.canary_promote",
            policy_name=locked.name,
            version=version.number,
            previous=stable.version.number if stable else None,
            **({"message": message} if message else {}),
            **({"why": why} if why else {}),
        )
        distribution = _distribute_after_commit()
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
