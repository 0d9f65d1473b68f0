"""Writes: every state change of schedweb goes through one of these functions.

Each validates, changes the database in one transaction with its audit row, and schedules the
Redis distribution of active versions with `transaction.on_commit` (so a rolled-back publish never
reaches an extender). Publish, rollback and deactivation then wait, at most
SCHEDWEB_PUBLISH_CONFIRM_SECONDS, until every live extender process serves the change, and say
which have not (`ServedReport`, policies/publishing.py): a pipeline that publishes and then
creates pods gets the new rule for every pod. Views, API classes and commands parse input, call
one of these, and render. Refusals raise the ServiceError family of policies/errors.py.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone

from policies import selectors
from policies.cluster.manifest import MAX_POD_BYTES, parse_manifest, pod_view_from_object
from policies.engine.document import MAX_DOCUMENT_BYTES, FieldError, PolicyInvalid
from policies.engine.testcases import expect_errors
from policies.errors import (
    Conflict,
    InputError,
    NotFound,
    PreconditionFailed,
    PreconditionRequired,
    ServiceError,
    TestsFailed,
)
from policies.evaluation import policy_compile, test_cases_run
from policies.models import (
    ApiToken,
    AuditEvent,
    Policy,
    PolicyActivation,
    PolicyTestCase,
    PolicyVersion,
    SchedulerProfile,
    SharedPreview,
)
from policies.numbers import number_or_none
from policies.publishing import Distribution, ServedReport, publishing_lock
from policies.rollout.records import (  # noqa: F401 (the bounds are services' too)
    DECISION_MAX_MESSAGE,
    DECISION_MAX_NODES,
    shadow_tally_row,
)
from policies.rollout.records import decision_nodes as _decision_nodes
from policies.rollout.records import shadow_fields as _shadow_fields
from policies.schedmodel.profile import ProfileInvalid, profile_parse

log = logging.getLogger(__name__)

MESSAGE_MAX_CHARS = 2000  # a publish message or a rollback reason: what the audit log keeps


def _audit(
    *, actor, action: str, policy_name: str = "", version: int | None = None, **detail: Any
) -> None:
    AuditEvent.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        actor_name=getattr(actor, "username", "") or "system",
        action=action,
        policy_name=policy_name,
        version=version,
        detail=detail,
    )


def _distribute_after_commit() -> Distribution:
    """The active set goes to Redis once the transaction commits; `served()` waits for it."""
    distribution = Distribution()
    transaction.on_commit(distribution)
    return distribution


def _lock_publishing() -> None:
    """Serialises publish/rollback/deactivate across policies (the schedulerName check) and
    with the distributions of the active set (policies/publishing.py)."""
    publishing_lock()


# --- policies and drafts ------------------------------------------------------------------


def policy_create(*, actor, document: str, description: str | None = None) -> Policy:
    """A new policy whose draft is `document`; its name comes from the document."""
    compiled = policy_compile(document)
    name = compiled.spec.name
    try:
        with transaction.atomic():
            policy = Policy.objects.create(
                name=name,
                description=compiled.spec.description if description is None else description,
                draft=document,
                owner=actor if getattr(actor, "pk", None) else None,
            )
            _audit(actor=actor, action="policy.create", policy_name=name)
    except IntegrityError:
        raise Conflict(f"a policy named {name!r} already exists") from None
    return policy


def policy_update_draft(*, actor, policy: Policy, document: str, if_match: str | None) -> Policy:
    """Saves a new draft if `if_match` is the current ETag; a stale one changes nothing (412)."""
    if not if_match:
        raise PreconditionRequired(
            f"send the draft's ETag in If-Match (currently {policy.etag}) so that a concurrent edit is not overwritten"
        )
    compiled = policy_compile(document)
    if compiled.spec.name != policy.name:
        raise ServiceError(
            f"the document is named {compiled.spec.name!r} but this policy is {policy.name!r}; a policy cannot be renamed",
            details=[FieldError("name", "must stay " + policy.name).to_dict()],
        )
    expected = _revision_from_etag(if_match, policy)
    with transaction.atomic():
        updated = Policy.objects.filter(pk=policy.pk, draft_revision=expected).update(
            draft=document,
            description=compiled.spec.description,
            draft_revision=F("draft_revision") + 1,
            updated_at=timezone.now(),
        )
        if not updated:
            current = Policy.objects.get(pk=policy.pk)
            raise PreconditionFailed(
                f"the draft changed since you read it (your ETag {if_match}, current {current.etag}); reload and apply your edit again"
            )
        _audit(
            actor=actor,
            action="policy.update_draft",
            policy_name=policy.name,
            revision=expected + 1,
        )
    policy.refresh_from_db()
    return policy


def _revision_from_etag(etag: str, policy: Policy) -> int:
    value = etag.strip()
    if value.startswith("W/"):
        value = value[2:]
    value = value.strip('"')
    prefix = f"{policy.pk}-"
    if value == "*":
        return policy.draft_revision
    revision = number_or_none(value[len(prefix) :]) if value.startswith(prefix) else None
    if revision is None:
        raise PreconditionFailed(
            f"If-Match {etag} is not an ETag of this policy (current {policy.etag})"
        )
    return revision


def policy_import(*, actor, document: str) -> tuple[Policy, bool]:
    """Creates the policy named by `document` or replaces its draft (git-based workflows).

    An import is an explicit overwrite of the draft, so it does not take an ETag; it is audited.
    Returns (policy, created).
    """
    compiled = policy_compile(document)
    name = compiled.spec.name
    with transaction.atomic():
        policy = Policy.objects.select_for_update().filter(name=name).first()
        if policy is None:
            policy = Policy.objects.create(
                name=name,
                description=compiled.spec.description,
                draft=document,
                owner=actor if getattr(actor, "pk", None) else None,
            )
            _audit(actor=actor, action="policy.import", policy_name=name, created=True)
            return policy, True
        if policy.draft != document:
            Policy.objects.filter(pk=policy.pk).update(
                draft=document,
                description=compiled.spec.description,
                draft_revision=F("draft_revision") + 1,
                updated_at=timezone.now(),
            )
            _audit(actor=actor, action="policy.import", policy_name=name, created=False)
            policy.refresh_from_db()
    return policy, False


def policy_delete(*, actor, policy: Policy) -> None:
    """Deletes a policy with its versions, unless a version of it is serving."""
    with transaction.atomic():
        active = (
            PolicyActivation.objects.filter(policy=policy, active=True, role="active")
            .select_related("version")
            .first()
        )
        if active is not None:
            raise Conflict(
                f"policy {policy.name} is active (version {active.version.number} serves scheduling); deactivate it before deleting it"
            )
        _audit(
            actor=actor,
            action="policy.delete",
            policy_name=policy.name,
            versions=policy.versions.count(),
        )
        # The activation history goes with the policy (versions are protected from being
        # deleted on their own); the audit log keeps the record.
        PolicyActivation.objects.filter(policy=policy).delete()
        policy.delete()


# --- publishing ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PublishResult:
    version: PolicyVersion
    test_results: list[dict[str, Any]]
    served: ServedReport


@dataclass
class RollbackResult:
    activation: PolicyActivation
    served: ServedReport


def _check_scheduler_names(*, policy: Policy, names: list[str]) -> None:
    """One active policy per schedulerName: a pod is never judged by two policies at once."""
    conflict = selectors.scheduler_name_conflict(policy=policy, names=names)
    if conflict:
        raise Conflict(
            f"schedulerName {conflict['schedulerNames'][0]!r} is already served by policy "
            f"{conflict['policy']} (version {conflict['version']}); deactivate that policy or "
            "target another schedulerName",
            details={"schedulerNames": conflict["schedulerNames"], "policy": conflict["policy"]},
        )


def _activate(
    *,
    actor,
    policy: Policy,
    version: PolicyVersion,
    reason: str,
    role: str = PolicyActivation.Role.ACTIVE,
    rollout: dict[str, Any] | None = None,
) -> PolicyActivation:
    """`version` in force in `role`, replacing the one that was (the history keeps it)."""
    now = timezone.now()
    PolicyActivation.objects.filter(policy=policy, active=True, role=role).update(
        active=False, deactivated_at=now
    )
    return PolicyActivation.objects.create(
        policy=policy,
        version=version,
        role=role,
        active=True,
        rollout=rollout or {},
        reason=reason,
        activated_by=actor if getattr(actor, "pk", None) else None,
    )


def _shadow_in_force(
    *, policy: Policy, role: str = PolicyActivation.Role.SHADOW
) -> PolicyActivation | None:
    """The policy's shadow (or, with `role`, its canary) in force, if any."""
    return (
        PolicyActivation.objects.filter(policy=policy, active=True, role=role)
        .select_related("version")
        .first()
    )


def _shadow_end(
    *,
    actor,
    policy: Policy,
    why: str,
    message: str = "",
    role: str = PolicyActivation.Role.SHADOW,
    **extra: Any,
) -> PolicyActivation | None:
    """Takes the policy's shadow (or, with `role`, its canary) out of force (audited, `why`:
    discarded, deactivated, promoted, active, rollback; a canary also aborted, guard); None when
    it had none. Called under the publishing lock, in the transaction."""
    shadow = _shadow_in_force(policy=policy, role=role)
    if shadow is None:
        return None
    PolicyActivation.objects.filter(pk=shadow.pk).update(
        active=False, deactivated_at=timezone.now()
    )
    if why != "promoted":  # a promotion's own audit row says it
        _audit(
            actor=actor,
            action="policy.shadow_discard"
            if role == PolicyActivation.Role.SHADOW
            else "policy.canary_abort",
            policy_name=policy.name,
            version=shadow.version.number,
            why=why,
            **({"message": message} if message else {}),
            **extra,
        )
    return shadow


def _publish_role(*, policy: Policy, shadow: bool, canary: dict[str, Any] | None) -> str:
    """The role a publish activates its version in; a Conflict when the other experiment of
    the two (shadow, canary) is in flight for this policy (its schedulerNames)."""
    if shadow and canary is not None:
        raise ServiceError(
            "publish either as a shadow or as a canary, not both",
            details=[FieldError("canary", "not with shadow").to_dict()],
        )
    if not shadow and canary is None:
        return PolicyActivation.Role.ACTIVE
    role, other = ("shadow", "canary") if shadow else ("canary", "shadow")
    running = _shadow_in_force(policy=policy, role=other)
    if running is not None:
        raise Conflict(
            f"policy {policy.name} has a {other} in flight (version {running.version.number}): "
            f"a schedulerName has a shadow or a canary, never both; end the {other} first"
        )
    return role


def _shadow_target(*, policy: Policy, names: list[str]) -> PolicyActivation:
    """The active activation a new shadow of `policy` is judged beside: the shadow serves only
    schedulerNames its active version serves (a pod is judged by the shadow only where the
    active version answers it), so one shadow per policy is one per schedulerName."""
    current = (
        PolicyActivation.objects.filter(
            policy=policy, active=True, role=PolicyActivation.Role.ACTIVE
        )
        .select_related("version")
        .first()
    )
    if current is None:
        raise Conflict(
            f"policy {policy.name} has no active version: a shadow is judged beside the active "
            "version of its schedulerName; publish it (without --shadow) first"
        )
    extra = sorted(set(names) - set(current.version.scheduler_names))
    if extra:
        raise Conflict(
            f"the draft targets schedulerName {extra[0]!r}, which the active version "
            f"{current.version.number} does not serve: a shadow is judged only where the active "
            "version answers",
            details={"schedulerNames": extra},
        )
    return current


def policy_publish(
    *,
    actor,
    policy: Policy,
    message: str,
    revision: int,
    cluster=None,
    shadow: bool = False,
    canary: dict[str, Any] | None = None,
) -> PublishResult:
    """Validates the draft at `revision` (the one the publisher was shown), runs its test cases,
    then stores and activates a new version; with `shadow`, the new version is the shadow of the
    active version instead (issue 25: judged after every answer, recorded, never answering),
    replacing an earlier shadow. A shadow publish has the same gate, the same message and the
    same served confirmation. With `canary` (a checked rollout: share, guard, promoteAfterSeconds,
    policies.rollout.canary.canary_rollout), the new version decides the share of the pods and
    the active version the rest (issue 25's canary). A schedulerName has a shadow or a canary in
    flight, never both (409): two experiments at once would make each one's report unreadable.
    A plain publish ends a canary (audited): the new version is what the publisher wants now.

    All or nothing: a failure at any step leaves the previous version active and serving. The
    draft is read, compared with `revision` (412 when it moved on) and tested under the
    publishing lock, so a slow publish of an older draft can never commit after a newer one
    and replace it (issue 14); publishes of the same installation run one after another.
    """
    message = (message or "").strip()
    if not message:
        raise ServiceError(
            "a publish message is required: say what changed and why",
            details=[FieldError("message", "required").to_dict()],
        )
    if len(message) > MESSAGE_MAX_CHARS:
        raise ServiceError(f"the publish message is longer than {MESSAGE_MAX_CHARS} characters")
    with transaction.atomic():
        _lock_publishing()
        locked = Policy.objects.select_for_update().get(pk=policy.pk)
        if locked.draft_revision != revision:
            raise PreconditionFailed(
                f"the draft changed since it was shown (revision {revision}, now "
                f"{locked.draft_revision}); review it again before publishing"
            )
        document = locked.draft
        compiled = policy_compile(document)
        results = test_cases_run(compiled=compiled, stored=locked.test_cases.all(), cluster=cluster)
        failed = [r for r in results if not r["passed"]]
        if failed:
            raise TestsFailed(
                f"{len(failed)} of {len(results)} test case{'s' if len(results) != 1 else ''} failed; nothing was published",
                details=results,
            )
        names = list(compiled.spec.scheduler_names)
        role = _publish_role(policy=locked, shadow=shadow, canary=canary)
        current = _shadow_target(policy=locked, names=names) if role != "active" else None
        if role == "active":
            _check_scheduler_names(policy=locked, names=names)
        number = (locked.versions.aggregate(n=Max("number"))["n"] or 0) + 1
        version = PolicyVersion.objects.create(
            policy=locked,
            number=number,
            document=document,
            content_hash=hashlib.sha256(document.encode()).hexdigest(),
            scheduler_names=names,
            author=actor if getattr(actor, "pk", None) else None,
            message=message,
        )
        replaced = _shadow_in_force(policy=locked, role=role) if role != "active" else None
        if role == "active":
            _shadow_end(actor=actor, policy=locked, why="published", role="canary")
        _activate(
            actor=actor,
            policy=locked,
            version=version,
            reason=PolicyActivation.Reason.PUBLISH,
            role=role,
            rollout=canary,
        )
        _audit(
            actor=actor,
            action={"shadow": "policy.shadow", "canary": "policy.canary"}.get(
                role, "policy.publish"
            ),
            **(canary or {}),
            policy_name=policy.name,
            version=number,
            message=message,
            tests=len(results),
            **({"active": current.version.number} if current else {}),
            **({"replaced": replaced.version.number} if replaced else {}),
        )
        distribution = _distribute_after_commit()
    return PublishResult(version=version, test_results=results, served=distribution.served())


def policy_revision_from_etag(
    *, policy: Policy, if_match: str | None, action: str = "publish"
) -> int:
    """The draft revision an If-Match names, for publish (or accepting new test results):
    required (428), this policy's, and exact (`*` would take whatever the draft has become:
    412)."""
    if not if_match:
        raise PreconditionRequired(
            f"send the draft's ETag in If-Match (currently {policy.etag}): {action} takes the "
            "draft revision that was reviewed"
        )
    if if_match.strip() == "*":
        raise PreconditionFailed(f"{action} needs the draft's exact ETag (currently {policy.etag})")
    return _revision_from_etag(if_match, policy)


def policy_rollback(*, actor, policy: Policy, number: int, message: str = "") -> RollbackResult:
    """Activates an earlier version again (versions are never edited); `message`, why (optional,
    like publish's), is kept in the audit log."""
    message = message.strip()
    if len(message) > MESSAGE_MAX_CHARS:
        raise InputError(
            f"the rollback reason is longer than {MESSAGE_MAX_CHARS} characters",
            details=[FieldError("message", f"at most {MESSAGE_MAX_CHARS} characters").to_dict()],
        )
    version = PolicyVersion.objects.filter(policy=policy, number=number).first()
    if version is None:
        raise NotFound(f"policy {policy.name} has no version {number}")
    try:
        policy_compile(version.document)
    except PolicyInvalid as exc:
        raise Conflict(
            f"version {number} no longer compiles and cannot serve: {exc}",
            details=[e.to_dict() for e in exc.errors],
        ) from None
    with transaction.atomic():
        _lock_publishing()
        locked = Policy.objects.select_for_update().get(pk=policy.pk)
        _check_scheduler_names(policy=locked, names=version.scheduler_names)
        current = (
            PolicyActivation.objects.filter(policy=locked, active=True, role="active")
            .select_related("version")
            .first()
        )
        if current is not None and current.version_id == version.pk:
            raise Conflict(f"version {number} is already the active version of {policy.name}")
        activation = _activate(
            actor=actor, policy=locked, version=version, reason=PolicyActivation.Reason.ROLLBACK
        )
        shadow = _shadow_in_force(policy=locked)
        if shadow is not None and shadow.version_id == version.pk:
            # Compared with itself, a shadow has nothing to say. Any other shadow stays, judged
            # beside whatever is active now (the least surprising: nobody asked to end it).
            _shadow_end(actor=actor, policy=locked, why="active")
        # A canary is measured against the version it was published beside: that one is gone.
        _shadow_end(actor=actor, policy=locked, why="rollback", role="canary")
        _audit(
            actor=actor,
            action="policy.rollback",
            policy_name=policy.name,
            version=number,
            previous=current.version.number if current else None,
            **({"message": message} if message else {}),
        )
        distribution = _distribute_after_commit()
    return RollbackResult(activation=activation, served=distribution.served())


def policy_deactivate(*, actor, policy: Policy) -> ServedReport:
    """Takes a policy out of service: its pods pass through the extender untouched."""
    with transaction.atomic():
        _lock_publishing()
        now = timezone.now()
        current = (
            PolicyActivation.objects.filter(policy=policy, active=True, role="active")
            .select_related("version")
            .first()
        )
        if current is None:
            raise Conflict(f"policy {policy.name} is not active")
        PolicyActivation.objects.filter(pk=current.pk).update(active=False, deactivated_at=now)
        # Nothing left to compare with: the shadow ends too, with its own audit row.
        _shadow_end(actor=actor, policy=policy, why="deactivated")
        _shadow_end(actor=actor, policy=policy, why="deactivated", role="canary")
        _audit(
            actor=actor,
            action="policy.deactivate",
            policy_name=policy.name,
            version=current.version.number,
        )
        distribution = _distribute_after_commit()
    return distribution.served()


# --- test cases ------------------------------------------------------------------------------


def _check_test_case(*, pod: str, cluster: str, expect: Any) -> None:
    errors = []
    try:
        pod_view_from_object(parse_manifest(pod))
    except InputError as exc:
        errors.append(FieldError("pod", str(exc)).to_dict())
    if cluster not in ("", "demo"):
        try:
            parse_manifest(cluster, what="cluster")
        except InputError as exc:
            errors.append(FieldError("cluster", str(exc)).to_dict())
    errors += [FieldError(field, problem).to_dict() for field, problem in expect_errors(expect)]
    if errors:
        raise ServiceError("the test case is invalid", details=errors)


def test_case_create(
    *, actor, policy: Policy, name: str, pod: str, cluster: str, expect: dict
) -> PolicyTestCase:
    """A test case for `policy`; names are unique per policy."""
    _check_test_case(pod=pod, cluster=cluster, expect=expect)
    try:
        with transaction.atomic():
            case = PolicyTestCase.objects.create(
                policy=policy,
                name=name,
                pod=pod,
                cluster=cluster,
                expect=expect,
                created_by=actor if getattr(actor, "pk", None) else None,
            )
            _audit(actor=actor, action="testcase.create", policy_name=policy.name, name=name)
    except IntegrityError:
        raise Conflict(f"policy {policy.name} already has a test case named {name!r}") from None
    return case


def test_case_update(
    *, actor, case: PolicyTestCase, pod: str, cluster: str, expect: dict
) -> PolicyTestCase:
    """Replaces a test case's pod, cluster and expectation (hand-edited); the audit row names
    the fields that changed."""
    _check_test_case(pod=pod, cluster=cluster, expect=expect)
    with transaction.atomic():
        old = {"pod": case.pod, "cluster": case.cluster, "expect": case.expect}
        case.pod, case.cluster, case.expect = pod, cluster, expect
        case.save(update_fields=["pod", "cluster", "expect"])
        changed = [k for k, v in old.items() if getattr(case, k) != v]
        _audit(
            actor=actor,
            action="testcase.update",
            policy_name=case.policy.name,
            name=case.name,
            changed=changed,
        )
    return case


MAX_ACCEPT_NAMES = 1000  # more names than a policy has cases is a mistake or an attack


def test_cases_accept(
    *, actor, policy: Policy, revision: int, names: list[str] | None = None
) -> list[dict[str, Any]]:
    """ "Accept new results": each failing stored case (of `names`, or every one) gets its
    expectation re-recorded from the draft at `revision`, the one whose results were reviewed
    (412 when the draft moved on). Only what fails is edited (engine.testcases.rerecord).
    Returns [{name, expect, changes}] of the cases written, one audit row each."""
    if names is not None:
        if len(names) > MAX_ACCEPT_NAMES:
            raise ServiceError(f"at most {MAX_ACCEPT_NAMES} test case names at once")
        if not names:
            raise ServiceError(
                "name at least one test case (or leave cases out: every failing one)",
                details=[FieldError("cases", "must not be empty").to_dict()],
            )
    with transaction.atomic():
        locked = Policy.objects.select_for_update().get(pk=policy.pk)
        if locked.draft_revision != revision:
            raise PreconditionFailed(
                f"the draft changed since its results were shown (revision {revision}, now "
                f"{locked.draft_revision}); review the changes again"
            )
        cases = {c.name: c for c in locked.test_cases.select_for_update()}
        if names is not None:
            unknown = [
                FieldError(f"cases[{i}]", f"policy {policy.name} has no test case {n!r}").to_dict()
                for i, n in enumerate(names)
                if n not in cases
            ]
            if unknown:
                raise ServiceError("unknown test case names", details=unknown)
            cases = {n: cases[n] for n in dict.fromkeys(names)}
        compiled = policy_compile(locked.draft)
        results = test_cases_run(compiled=compiled, stored=cases.values(), review=True)
        accepted = []
        for result in results:
            if "proposed" not in result or result["name"] not in cases:
                continue  # passes, or its pod or cluster is unusable: nothing to accept
            case = cases[result["name"]]
            case.expect = result["proposed"]
            case.save(update_fields=["expect"])
            _audit(
                actor=actor,
                action="testcase.accept",
                policy_name=policy.name,
                name=case.name,
                revision=revision,
                changes=result["changes"][:50],
            )
            accepted.append(
                {"name": case.name, "expect": case.expect, "changes": result["changes"]}
            )
    return accepted


def test_case_delete(*, actor, case: PolicyTestCase) -> None:
    with transaction.atomic():
        _audit(actor=actor, action="testcase.delete", policy_name=case.policy.name, name=case.name)
        case.delete()


# --- API tokens --------------------------------------------------------------------------------

TOKEN_PREFIX = "swt_"


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def api_token_create(*, actor, user, name: str) -> tuple[ApiToken, str]:
    """A new token; the raw key is returned once and only its hash is stored."""
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise ServiceError(
            "a token needs a name of 1 to 100 characters",
            details=[FieldError("name", "required").to_dict()],
        )
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user, name=name, prefix=raw[:12], key_hash=hash_token(raw)
        )
        _audit(
            actor=actor, action="token.create", token=token.prefix, name=name, user=user.username
        )
    return token, raw


def api_token_revoke(*, actor, token: ApiToken) -> ApiToken:
    if token.revoked_at is not None:
        raise Conflict("this token is already revoked")
    with transaction.atomic():
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
        _audit(actor=actor, action="token.revoke", token=token.prefix, user=token.user.username)
    return token


# --- extender decisions ---------------------------------------------------------------------------


def _bounded_manifest(value: Any) -> str:
    """A decision's pod manifest as queued: JSON text of at most 64 KiB, else nothing."""
    if not isinstance(value, str) or len(value) > 64 * 1024:
        return ""
    try:
        return value if isinstance(json.loads(value), dict) else ""
    except ValueError:
        return ""


def _tally_row(item: dict[str, Any]):
    """The ShadowTally row of a queued tally, or None (logged) when it is malformed."""
    try:
        return shadow_tally_row(item)
    except (KeyError, TypeError, ValueError, OverflowError, OSError) as exc:
        log.warning("skipped a malformed shadow tally: %s", exc)
        return None


def _decision_row(item: dict[str, Any]):
    """The Decision row of one queued record, or None (logged) when the record is malformed: one
    bad record never drops its batch."""
    from datetime import UTC, datetime

    from policies.models import Decision

    try:
        pod = item["pod"]
        fields = (pod["namespace"], pod["name"], pod["uid"], item["policy"], item["verb"])
        if not all(isinstance(f, str) for f in fields) or not isinstance(item["nodes"], list):
            raise TypeError("a field has the wrong type")
        if not all(isinstance(n, dict) for n in item["nodes"]):
            raise TypeError("a node entry is not an object")
        role, outcome, shadow = _shadow_fields(item)
        return Decision(
            role=role,
            shadow_outcome=outcome,
            arm=item.get("arm") if item.get("arm") in ("canary", "stable") else "",
            created_at=datetime.fromtimestamp(float(item["at"]), tz=UTC),
            pod_namespace=pod["namespace"][:253],
            pod_name=pod["name"][:253],
            pod_uid=pod["uid"][:64],
            policy_name=item["policy"][:63],
            policy_version=int(item["version"]),
            verb=item["verb"][:16],
            nodes={
                "scores": list(item.get("scores", []))[:64],
                "weights": list(item.get("weights", []))[:64],
                **_decision_nodes(item["nodes"]),
                # records queued by an older extender have no winners; the page recomputes them
                **({"winners": list(item["winners"])[:64]} if "winners" in item else {}),
                # the request waited for the snapshot to catch up (issue 24)
                **_catch_up_record(item.get("catchUp")),
                **shadow,
            },
            pod_manifest=_bounded_manifest(item.get("podManifest")),
        )
    except (KeyError, TypeError, ValueError, OverflowError, OSError) as exc:
        log.warning("skipped a malformed decision record: %s", exc)
        return None


_CATCH_UP_OUTCOMES = frozenset({"caught-up", "timed-out"})


def _catch_up_record(value: Any) -> dict[str, Any]:
    """A decision's `catchUp` as stored ({} when absent or not what the extender writes): how
    long the request waited for the snapshot, for which nodes (at most 20) or its pod, and how
    the wait ended."""
    if not isinstance(value, dict) or value.get("outcome") not in _CATCH_UP_OUTCOMES:
        return {}
    waited = value.get("waitedMs")
    nodes = value.get("nodes")
    if type(waited) not in (int, float) or not isinstance(nodes, list):
        return {}
    return {
        "catchUp": {
            "waitedMs": round(min(max(float(waited), 0.0), 3_600_000.0), 1),
            "outcome": value["outcome"],
            "nodes": [str(n)[:253] for n in nodes[:20]],
            "pod": value.get("pod") is True,
        }
    }


def decisions_store(*, batch: list[dict[str, Any]]) -> int:
    """Stores sampled extender decisions, shadow tallies and the nodes binds chose; returns the
    decision rows written."""
    from datetime import UTC, datetime

    from policies.models import Decision, ShadowTally

    rows = [
        row
        for item in batch
        if isinstance(item, dict) and item.get("kind") == "decision"
        for row in [_decision_row(item)]
        if row is not None
    ]
    tallies = [
        row
        for item in batch
        if isinstance(item, dict) and item.get("kind") == "shadow-tally"
        for row in [_tally_row(item)]
        if row is not None
    ]
    with transaction.atomic():
        Decision.objects.bulk_create(rows)
        ShadowTally.objects.bulk_create(tallies)
        for item in batch:
            if not isinstance(item, dict) or item.get("kind") != "chosen":
                continue
            uid, node, at = item.get("podUid"), item.get("node"), item.get("at")
            if isinstance(uid, str) and uid and isinstance(node, str) and type(at) in (int, float):
                Decision.objects.filter(pod_uid=uid[:64], chosen_node="").update(
                    chosen_node=node[:253], chosen_at=datetime.fromtimestamp(at, tz=UTC)
                )
    return len(rows)


# --- share links -----------------------------------------------------------------------------

MAX_SHARES_PER_USER = 500  # unexpired links one user may hold: a share stores a document


def share_create(
    *,
    actor,
    policy: Policy,
    document: str,
    pod: str,
    pasted: str,
    pod_manifest: str,
    cluster: str,
    snapshot: str,
    days: int,
    what_if: str = "",
) -> SharedPreview:
    """A share link of a playground state; every field bounded (the document like a policy
    document, the pod texts like a pasted pod), and at most MAX_SHARES_PER_USER open links."""
    problems = []
    if len(document.encode("utf-8", "surrogatepass")) > MAX_DOCUMENT_BYTES:
        problems.append(FieldError("document", f"larger than {MAX_DOCUMENT_BYTES} bytes"))
    for field_name, text in (("pod_yaml", pasted), ("pod_manifest", pod_manifest)):
        if len(text.encode("utf-8", "surrogatepass")) > MAX_POD_BYTES:
            problems.append(FieldError(field_name, f"larger than {MAX_POD_BYTES} bytes"))
    if len(pod) > 600:
        problems.append(FieldError("pod", "at most 600 characters"))
    if len(what_if.encode("utf-8", "surrogatepass")) > MAX_POD_BYTES // 4:
        problems.append(FieldError("what_if", f"larger than {MAX_POD_BYTES // 4} bytes"))
    if problems:
        raise InputError("the share link cannot be made", details=[p.to_dict() for p in problems])
    now = timezone.now()
    open_links = SharedPreview.objects.filter(created_by=actor, expires_at__gt=now).count()
    if open_links >= MAX_SHARES_PER_USER:
        raise Conflict(
            f"you have {open_links} open share links, the most one user may hold; "
            "older ones expire by themselves"
        )
    with transaction.atomic():
        share = SharedPreview.objects.create(
            token=secrets.token_urlsafe(16),
            policy=policy,
            document=document,
            pod=pod,
            pasted=pasted,
            pod_manifest=pod_manifest,
            cluster=cluster,
            what_if=what_if,
            snapshot=snapshot[:64],
            created_by=actor,
            expires_at=now + timedelta(days=days),
        )
        _audit(actor=actor, action="share.create", policy_name=policy.name, token=share.token[:6])
    return share


def shares_prune() -> int:
    """Deletes expired share links (beat, hourly)."""
    deleted, _ = SharedPreview.objects.filter(expires_at__lte=timezone.now()).delete()
    return deleted


def decisions_prune(*, older_than_days: int) -> int:
    """Deletes decision records older than `older_than_days` (beat, hourly); returns how many."""
    from datetime import timedelta

    from policies.models import Decision, ShadowTally

    cutoff = timezone.now() - timedelta(days=older_than_days)
    deleted, _ = Decision.objects.filter(created_at__lt=cutoff).delete()
    tallies, _ = ShadowTally.objects.filter(created_at__lt=cutoff).delete()
    return deleted + tallies


def decisions_resolve_chosen(*, cluster) -> int:
    """Fills in the chosen node of recent decisions from the snapshot (pods bound since)."""
    from datetime import timedelta

    from policies.models import Decision

    since = timezone.now() - timedelta(hours=1)
    pending = (
        Decision.objects.filter(chosen_node="", created_at__gte=since)
        .values_list("pod_uid", flat=True)
        .distinct()
    )
    updated = 0
    now = timezone.now()
    for uid in list(pending[:2000]):
        pod = cluster.state.pod(uid)
        if pod is not None and pod["nodeName"]:
            updated += Decision.objects.filter(pod_uid=uid, chosen_node="").update(
                chosen_node=pod["nodeName"], chosen_at=now
            )
    return updated


# --- the scheduler configuration the previews model ---------------------------------------


def profile_errors(errors: list[str]) -> list[dict[str, str]]:
    """ProfileInvalid's "path: message" strings as field errors ({path, message})."""
    out = []
    for error in errors:
        path, sep, message = error.partition(": ")
        out.append({"path": path, "message": message} if sep else {"path": "", "message": error})
    return out


def scheduler_profile_set(*, actor, text: str) -> SchedulerProfile:
    """Store the KubeSchedulerConfiguration every preview models ("" = the default that
    `schedulerconfig` prints); refuses one the model cannot run, listing every field error."""
    text = text.strip()
    if text:
        try:
            profile = profile_parse(text)
        except ProfileInvalid as exc:
            raise InputError(
                f"the scheduler configuration is invalid ({len(exc.errors)} problem"
                f"{'s' if len(exc.errors) != 1 else ''})",
                details=profile_errors(exc.errors),
            ) from None
        detail = {"extender_weight": profile.extender_weight, "strategy": profile.strategy}
    else:
        detail = {"default": True}
    with transaction.atomic():
        row, _ = SchedulerProfile.objects.select_for_update().get_or_create(pk=1)
        row.text = text + "\n" if text else ""
        row.updated_by = actor if getattr(actor, "pk", None) else None
        row.save()
        _audit(actor=actor, action="schedulerprofile.set", **detail)
    return row
