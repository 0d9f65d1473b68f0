"""A canary's life (issue 25, item 3): its rollout checked field by field, published through
publish's path (served by every extender process when the call returns), never beside a
shadow, promoted to 100% or aborted back to the stable version, audited; a rollback or a plain
publish ends it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from policies import services
from policies.errors import Conflict, ServiceError
from policies.extender.runtime import runtime
from policies.models import AuditEvent, Policy, PolicyActivation
from policies.publishing import active_policies_entries
from policies.rollout.canary import (
    canary_check,
    canary_guard_rollback,
    canary_rollout,
    policy_canary_abort,
    policy_canary_promote,
)
from policies.rollout.guard import trip_claim
from policies.ui.ops_views import audit_row
from tests.api.conftest import document
from tests.conftest import make_user

from .test_shadow_lifecycle import _draft


def _active_and_canary(publisher, **rollout) -> Policy:
    """Policy `least`: v1 stable, v2 its canary (`rollout`: canary_rollout's; 25% by default)."""
    policy = services.policy_create(actor=publisher, document=document())
    services.policy_publish(
        actor=publisher, policy=policy, message="v1", revision=policy.draft_revision
    )
    return _canary_of(publisher, policy, "candidate", **rollout)


def _canary_of(publisher, policy: Policy, text: str, **rollout) -> Policy:
    """The next version of `policy` (its description `text`) published as its canary."""
    policy = _draft(Policy.objects.get(pk=policy.pk), document().replace("test policy", text))
    services.policy_publish(
        actor=publisher,
        policy=policy,
        message=f"{text} for some",
        revision=policy.draft_revision,
        canary=canary_rollout(**(rollout or {"percent": "25%"})),
    )
    return Policy.objects.get(pk=policy.pk)


def _served() -> tuple[str, str | None]:
    served = runtime().registry.by_scheduler["schedweb"]
    return served.label, served.canary.label if served.canary else None


@pytest.mark.parametrize(
    ("given", "path"),
    [
        ({"percent": 0}, "canary.percent"),
        ({"percent": "100%"}, "canary.percent"),
        ({"percent": True}, "canary.percent"),
        ({"percent": "lots"}, "canary.percent"),
        ({"percent": float("nan")}, "canary.percent"),
        ({}, "canary"),
        ({"percent": 5, "selector": "a=b"}, "canary"),
        ({"selector": "team in (a"}, "canary.selector"),
        ({"selector": "a=b,"}, "canary.selector"),
        ({"selector": "   "}, "canary.selector"),
        ({"selector": "x" * 2000}, "canary.selector"),
        ({"selector": "!a=b"}, "canary.selector"),
        ({"selector": "bad key=b"}, "canary.selector"),
        ({"percent": 5, "guard": {"rejectedRate": 101}}, "canary.guard.rejectedRate"),
        ({"percent": 5, "guard": {"errorRate": -1}}, "canary.guard.errorRate"),
        ({"percent": 5, "guard": {"minPods": 0}}, "canary.guard.minPods"),
        ({"percent": 5, "guard": {"minPods": 2.5}}, "canary.guard.minPods"),
        ({"percent": 5, "guard": {"other": 1}}, "canary.guard.other"),
        ({"percent": 5, "guard": [1]}, "canary.guard"),
        ({"percent": 5, "promote_after": 1}, "canary.promoteAfterSeconds"),
    ],
)
def test_a_rollout_out_of_range_or_malformed_is_refused_with_its_field_path(given, path):
    with pytest.raises(ServiceError) as caught:
        canary_rollout(**given)
    assert type(caught.value) is ServiceError  # 400 (policies/api/errors.py)
    assert caught.value.details[0]["path"] == path


def test_a_rollout_in_range_is_stored_with_the_guard_s_defaults_filled_in():
    assert canary_rollout(percent="20%", promote_after=3600) == {
        "share": {"percent": 20.0},
        "guard": {"rejectedRate": 5.0, "errorRate": 5.0, "minPods": 20},
        "promoteAfterSeconds": 3600,
    }
    assert canary_rollout(selector=" team=a ", guard={"minPods": 50})["share"] == {
        "selector": "team=a"
    }


@pytest.mark.django_db(transaction=True)
def test_a_canary_publish_is_served_beside_its_stable_version_when_it_returns(extender):
    publisher = make_user("pub", "publisher")
    policy = _active_and_canary(publisher)
    assert _served() == ("least/v1", "least/v2")
    roles = dict(
        PolicyActivation.objects.filter(policy=policy, active=True).values_list(
            "role", "version__number"
        )
    )
    assert roles == {"active": 1, "canary": 2}
    (entry,) = active_policies_entries()
    assert (entry["version"], entry["canary"]["version"]) == (1, 2)
    assert entry["canary"]["share"] == {"percent": 25.0}
    event = AuditEvent.objects.filter(action="policy.canary").get()
    assert (event.version, event.detail["share"], event.detail["active"]) == (
        2,
        {"percent": 25.0},
        1,
    )
    record = [r for r in extender.hgetall("schedweb:extenders:served").values()]
    assert b'"canaries":{"schedweb":"least/v2"}' in record[0]


@pytest.mark.django_db(transaction=True)
def test_promote_makes_the_canary_the_active_version_everywhere(extender):
    publisher = make_user("pub", "publisher")
    policy = _active_and_canary(publisher)
    result = policy_canary_promote(actor=publisher, policy=policy, message="looks fine")
    assert result.served.served_by_all
    assert _served() == ("least/v2", None)
    assert not PolicyActivation.objects.filter(policy=policy, role="canary", active=True).exists()
    event = AuditEvent.objects.filter(action="policy.canary_promote").get()
    assert (event.version, event.detail["previous"]) == (2, 1)
    with pytest.raises(Conflict, match="no canary in flight"):
        policy_canary_promote(actor=publisher, policy=policy)


@pytest.mark.django_db(transaction=True)
def test_abort_goes_back_to_the_stable_version_everywhere(extender):
    publisher = make_user("pub", "publisher")
    policy = _active_and_canary(publisher, selector="team=a")
    served = policy_canary_abort(actor=publisher, policy=policy, message="not today")
    assert served.served_by_all
    assert _served() == ("least/v1", None)
    event = AuditEvent.objects.filter(action="policy.canary_abort").get()
    assert (event.version, event.detail["why"], event.detail["message"]) == (
        2,
        "aborted",
        "not today",
    )


@pytest.mark.django_db(transaction=True)
def test_a_shadow_and_a_canary_are_never_in_flight_at_once(extender):
    publisher = make_user("pub", "publisher")
    policy = _active_and_canary(publisher)
    policy = _draft(policy, document().replace("test policy", "third"))
    with pytest.raises(Conflict, match="has a canary in flight"):
        services.policy_publish(
            actor=publisher, policy=policy, message="m", revision=policy.draft_revision, shadow=True
        )
    with pytest.raises(ServiceError, match="not both"):
        services.policy_publish(
            actor=publisher,
            policy=policy,
            message="m",
            revision=policy.draft_revision,
            shadow=True,
            canary=canary_rollout(percent=5),
        )
    policy_canary_abort(actor=publisher, policy=policy)
    services.policy_publish(
        actor=publisher, policy=policy, message="m", revision=policy.draft_revision, shadow=True
    )
    policy = _draft(Policy.objects.get(pk=policy.pk), document().replace("test policy", "4th"))
    with pytest.raises(Conflict, match="has a shadow in flight"):
        services.policy_publish(
            actor=publisher,
            policy=policy,
            message="m",
            revision=policy.draft_revision,
            canary=canary_rollout(percent=5),
        )


@pytest.mark.django_db(transaction=True)
def test_a_plain_publish_or_a_rollback_ends_the_canary_with_an_audit_row(extender):
    publisher = make_user("pub", "publisher")
    policy = _active_and_canary(publisher)
    # a rollback (here to the canary's own version) ends the canary: it was measured against
    # the version it was published beside
    services.policy_rollback(actor=publisher, policy=policy, number=2)
    assert _served() == ("least/v2", None)
    assert AuditEvent.objects.filter(action="policy.canary_abort").get().detail["why"] == "rollback"
    policy = _canary_of(publisher, policy, "v3", percent=5)
    policy = _draft(Policy.objects.get(pk=policy.pk), document().replace("test policy", "v4"))
    services.policy_publish(
        actor=publisher, policy=policy, message="v4", revision=policy.draft_revision
    )
    assert _served() == ("least/v4", None)
    whys = list(
        AuditEvent.objects.filter(action="policy.canary_abort")
        .order_by("pk")
        .values_list("detail__why", flat=True)
    )
    assert whys == ["rollback", "published"]


TRIP = {
    "reason": "rejected",
    "canary": {"judged": 20, "rejected": 20, "errors": 0, "rejectedRate": 100.0, "errorRate": 0.0},
    "stable": {"judged": 60, "rejected": 0, "errors": 0, "rejectedRate": 0.0, "errorRate": 0.0},
    "threshold": {"rejectedRate": 5.0, "minPods": 20},
}


@pytest.mark.django_db(transaction=True)
def test_a_tripped_guard_rolls_the_canary_back_audited_with_the_guard_as_actor(extender):
    publisher = make_user("pub", "publisher")
    policy = _active_and_canary(publisher)
    assert trip_claim(extender, "least", 2, TRIP)
    assert not trip_claim(extender, "least", 2, TRIP)  # one process queues the rollback
    assert canary_guard_rollback(name="least", version=2, client=extender)
    assert _served() == ("least/v1", None)
    event = AuditEvent.objects.filter(action="policy.canary_abort").get()
    assert (event.actor_name, event.version, event.detail["why"]) == ("guard", 2, "guard")
    assert event.detail["canary"]["rejectedRate"] == 100.0
    assert event.detail["threshold"] == {"rejectedRate": 5.0, "minPods": 20}
    # Recent changes says it in words
    assert audit_row(event=event)["note"] == (
        "the guard rolled it back: pods rejected on every node 100.0% of 20 pods against the "
        "stable version's 0.0% (threshold 5.0 points, after 20 pods)"
    )
    # once rolled back, nothing more to do; a stale trip of another version is ignored
    assert not canary_guard_rollback(name="least", version=2, client=extender)
    assert not PolicyActivation.objects.filter(policy=policy, role="canary", active=True).exists()


@pytest.mark.django_db(transaction=True)
def test_the_periodic_check_rolls_back_a_lost_trip_and_promotes_a_quiet_canary(extender):
    publisher = make_user("pub", "publisher")
    policy = _active_and_canary(publisher, percent=10, promote_after="3600")
    activated = PolicyActivation.objects.get(role="canary", active=True).activated_at
    # not quiet for long enough yet: nothing happens
    assert canary_check(now=activated + timedelta(seconds=3599), client=extender) == {
        "rolledBack": 0,
        "promoted": 0,
    }
    assert _served() == ("least/v1", "least/v2")
    assert canary_check(now=activated + timedelta(seconds=3600), client=extender) == {
        "rolledBack": 0,
        "promoted": 1,
    }
    assert _served() == ("least/v2", None)
    event = AuditEvent.objects.filter(action="policy.canary_promote").get()
    assert (event.actor_name, event.detail["why"]) == ("guard", "quiet")
    # a canary whose trip was never acted on is rolled back by the next check
    _canary_of(publisher, policy, "v3", percent=10, promote_after=60)
    trip_claim(extender, "least", 3, TRIP)
    later = activated + timedelta(days=1)
    assert canary_check(now=later, client=extender) == {"rolledBack": 1, "promoted": 0}
    assert _served() == ("least/v2", None)
