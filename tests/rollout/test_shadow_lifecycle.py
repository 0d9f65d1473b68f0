"""A shadow version's life (issue 25): published through publish's path and gate, at most one
per schedulerName (service and database), promoted through the gate, discarded, and ended with
its active version; each change served by every extender process when the call returns, audited,
and allowed to publishers only.

An extender runtime runs in this process (role listener, pushed by Redis database 14): the
`extender` fixture (tests/rollout/conftest.py).
"""

from __future__ import annotations

import pytest
from django.core.management import CommandError
from django.db import IntegrityError, transaction

from policies import services
from policies.errors import Conflict, ServiceError, TestsFailed
from policies.extender.runtime import runtime
from policies.models import AuditEvent, Policy, PolicyActivation
from policies.publishing import active_policies_entries
from policies.rollout.services import policy_shadow_discard, policy_shadow_promote
from tests.api.conftest import document
from tests.api.test_served import _cli
from tests.conftest import make_user

POD = "metadata: {name: web, namespace: default}\nspec: {schedulerName: schedweb}\n"


def _draft(policy: Policy, text: str) -> Policy:
    Policy.objects.filter(pk=policy.pk).update(draft=text, draft_revision=policy.draft_revision + 1)
    return Policy.objects.get(pk=policy.pk)


def _active_and_shadow(publisher, *, shadow_text: str | None = None) -> Policy:
    """Policy `least`: v1 active, v2 its shadow (a different description)."""
    policy = services.policy_create(actor=publisher, document=document())
    services.policy_publish(
        actor=publisher, policy=policy, message="v1", revision=policy.draft_revision
    )
    policy = _draft(policy, shadow_text or document().replace("test policy", "candidate"))
    services.policy_publish(
        actor=publisher,
        policy=policy,
        message="try v2 beside v1",
        revision=policy.draft_revision,
        shadow=True,
    )
    return Policy.objects.get(pk=policy.pk)


def _served_labels() -> tuple[str, str | None]:
    served = runtime().registry.by_scheduler["schedweb"]
    return served.label, served.shadow.label if served.shadow else None


@pytest.mark.django_db(transaction=True)
def test_a_shadow_publish_is_served_beside_the_active_version_when_it_returns(extender):
    publisher = make_user("pub", "publisher")
    policy = _active_and_shadow(publisher)
    # the active version still answers; every process judges v2 beside it already
    assert _served_labels() == ("least/v1", "least/v2")
    roles = dict(
        PolicyActivation.objects.filter(policy=policy, active=True).values_list(
            "role", "version__number"
        )
    )
    assert roles == {"active": 1, "shadow": 2}
    event = AuditEvent.objects.filter(action="policy.shadow").get()
    assert (event.version, event.detail["active"], event.detail["message"]) == (
        2,
        1,
        "try v2 beside v1",
    )
    record = [r for r in extender.hgetall("schedweb:extenders:served").values()]
    assert b'"shadows":{"schedweb":"least/v2"}' in record[0]


@pytest.mark.django_db(transaction=True)
def test_a_second_shadow_replaces_the_first_one_per_scheduler_name(extender):
    publisher = make_user("pub", "publisher")
    policy = _active_and_shadow(publisher)
    policy = _draft(policy, document().replace("test policy", "third"))
    services.policy_publish(
        actor=publisher, policy=policy, message="v3", revision=policy.draft_revision, shadow=True
    )
    assert _served_labels() == ("least/v1", "least/v3")
    assert PolicyActivation.objects.filter(policy=policy, role="shadow", active=True).count() == 1
    assert (
        AuditEvent.objects.filter(action="policy.shadow", version=3).get().detail["replaced"] == 2
    )


@pytest.mark.django_db
def test_the_database_refuses_two_shadows_in_force_for_one_policy():
    publisher = make_user("pub", "publisher")
    policy = _active_and_shadow(publisher)
    version = policy.versions.get(number=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        PolicyActivation.objects.create(
            policy=policy, version=version, role="shadow", active=True, reason="publish"
        )
    # a shadow row does not count against the one active row, nor the other way round
    assert PolicyActivation.objects.filter(policy=policy, active=True).count() == 2


@pytest.mark.django_db
def test_a_shadow_needs_an_active_version_serving_its_scheduler_names():
    publisher = make_user("pub", "publisher")
    policy = services.policy_create(actor=publisher, document=document())
    with pytest.raises(Conflict, match="has no active version"):
        services.policy_publish(
            actor=publisher, policy=policy, message="m", revision=policy.draft_revision, shadow=True
        )
    services.policy_publish(
        actor=publisher, policy=policy, message="v1", revision=policy.draft_revision
    )
    policy = _draft(Policy.objects.get(pk=policy.pk), document(scheduler="other"))
    with pytest.raises(Conflict, match="schedulerName 'other', which the active version 1"):
        services.policy_publish(
            actor=publisher, policy=policy, message="m", revision=policy.draft_revision, shadow=True
        )
    assert not PolicyActivation.objects.filter(role="shadow").exists()
    assert policy.versions.count() == 1  # nothing stored


@pytest.mark.django_db
def test_a_shadow_publish_has_publish_s_gate_failing_tests_store_nothing():
    publisher = make_user("pub", "publisher")
    policy = services.policy_create(actor=publisher, document=document())
    services.policy_publish(
        actor=publisher, policy=policy, message="v1", revision=policy.draft_revision
    )
    services.test_case_create(
        actor=None, policy=policy, name="never", pod=POD, cluster="demo", expect={"applies": False}
    )
    policy = Policy.objects.get(pk=policy.pk)
    with pytest.raises(TestsFailed):
        services.policy_publish(
            actor=publisher, policy=policy, message="m", revision=policy.draft_revision, shadow=True
        )
    with pytest.raises(ServiceError, match="message is required"):
        services.policy_publish(
            actor=publisher, policy=policy, message=" ", revision=policy.draft_revision, shadow=True
        )
    assert policy.versions.count() == 1


@pytest.mark.django_db(transaction=True)
def test_promote_makes_the_shadow_active_on_every_process_when_it_returns(extender):
    publisher = make_user("pub", "publisher")
    policy = _active_and_shadow(publisher)
    result = policy_shadow_promote(actor=publisher, policy=policy, message="v2 looks right")
    assert result.served.served_by_all
    assert _served_labels() == ("least/v2", None)
    activation = PolicyActivation.objects.get(policy=policy, active=True)
    assert (activation.role, activation.version.number, activation.reason) == (
        "active",
        2,
        "promote",
    )
    event = AuditEvent.objects.filter(action="policy.promote").get()
    assert (event.version, event.detail["previous"], event.detail["message"]) == (
        2,
        1,
        "v2 looks right",
    )
    assert not AuditEvent.objects.filter(action="policy.shadow_discard").exists()


@pytest.mark.django_db(transaction=True)
def test_promote_runs_the_tests_as_they_are_now_and_changes_nothing_when_one_fails(extender):
    publisher = make_user("pub", "publisher")
    policy = _active_and_shadow(publisher)
    services.test_case_create(
        actor=None, policy=policy, name="never", pod=POD, cluster="demo", expect={"applies": False}
    )
    with pytest.raises(TestsFailed, match="failed on the shadow version; nothing was promoted"):
        policy_shadow_promote(actor=publisher, policy=policy, message="go")
    with pytest.raises(ServiceError, match="message is required"):
        policy_shadow_promote(actor=publisher, policy=policy, message="")
    with pytest.raises(Conflict, match="is version 2 now, not 7"):
        policy_shadow_promote(actor=publisher, policy=policy, message="go", expect_version=7)
    assert _served_labels() == ("least/v1", "least/v2")


@pytest.mark.django_db(transaction=True)
def test_discard_ends_the_shadow_on_every_process_when_it_returns(extender):
    publisher = make_user("pub", "publisher")
    policy = _active_and_shadow(publisher)
    served = policy_shadow_discard(actor=publisher, policy=policy, message="not needed")
    assert served.served_by_all
    assert _served_labels() == ("least/v1", None)
    event = AuditEvent.objects.filter(action="policy.shadow_discard").get()
    assert (event.version, event.detail) == (2, {"why": "discarded", "message": "not needed"})
    with pytest.raises(Conflict, match="has no shadow version"):
        policy_shadow_discard(actor=publisher, policy=policy)


@pytest.mark.django_db(transaction=True)
def test_a_rollback_keeps_the_shadow_and_a_deactivation_ends_it(extender):
    publisher = make_user("pub", "publisher")
    policy = services.policy_create(actor=publisher, document=document())
    for n in (1, 2):
        policy = _draft(policy, document().replace("test policy", f"v{n}"))
        services.policy_publish(
            actor=publisher, policy=policy, message=f"v{n}", revision=policy.draft_revision
        )
    policy = _draft(Policy.objects.get(pk=policy.pk), document().replace("test policy", "v3"))
    services.policy_publish(
        actor=publisher, policy=policy, message="v3", revision=policy.draft_revision, shadow=True
    )
    services.policy_rollback(actor=publisher, policy=policy, number=1)
    # the shadow keeps comparing with whatever is active
    assert _served_labels() == ("least/v1", "least/v3")
    services.policy_deactivate(actor=publisher, policy=policy)
    assert runtime().registry.by_scheduler == {}
    assert not PolicyActivation.objects.filter(active=True).exists()
    event = AuditEvent.objects.filter(action="policy.shadow_discard").get()
    assert (event.version, event.detail["why"]) == (3, "deactivated")


@pytest.mark.django_db
def test_a_rollback_to_the_shadow_s_own_version_ends_the_shadow():
    publisher = make_user("pub", "publisher")
    policy = _active_and_shadow(publisher)
    policy = _draft(policy, document().replace("test policy", "v3"))
    services.policy_publish(
        actor=publisher, policy=policy, message="v3", revision=policy.draft_revision
    )
    assert [e["shadow"]["version"] for e in active_policies_entries()] == [2]
    services.policy_rollback(actor=publisher, policy=policy, number=2)
    assert ["shadow" in e for e in active_policies_entries()] == [False]
    assert AuditEvent.objects.get(action="policy.shadow_discard").detail["why"] == "active"


@pytest.mark.django_db
def test_only_publishers_start_promote_and_discard_a_shadow(users_and_policy):
    clients, policy = users_and_policy
    for role in ("viewer", "editor"):
        client = clients[role]
        assert (
            client.post(
                "/api/v1/policies/least/publish",
                {"message": "m", "shadow": True},
                format="json",
                HTTP_IF_MATCH=policy.etag,
            ).status_code
            == 403
        )
        for action in ("promote", "discard"):
            response = client.post(
                f"/api/v1/policies/least/shadow/{action}", {"message": "m"}, format="json"
            )
            assert response.status_code == 403, (role, action)


@pytest.mark.django_db
def test_the_rest_api_publishes_promotes_and_discards_a_shadow(users_and_policy):
    clients, policy = users_and_policy
    api = clients["publisher"]
    policy = _draft(policy, document().replace("test policy", "v2"))
    bad = api.post(
        "/api/v1/policies/least/publish",
        {"message": "m", "shadow": "yes"},
        format="json",
        HTTP_IF_MATCH=policy.etag,
    )
    assert bad.status_code == 400 and bad.json()["errors"][0]["path"] == "shadow"
    published = api.post(
        "/api/v1/policies/least/publish",
        {"message": "v2 in shadow", "shadow": True},
        format="json",
        HTTP_IF_MATCH=policy.etag,
    )
    assert published.status_code == 201, published.content
    body = published.json()
    assert (body["role"], body["version"]["number"], body["version"]["active"]) == (
        "shadow",
        2,
        False,
    )
    missing = api.post("/api/v1/policies/least/shadow/promote", {}, format="json")
    assert missing.status_code == 400 and missing.json()["errors"][0]["path"] == "message"
    stale = api.post(
        "/api/v1/policies/least/shadow/promote", {"message": "go", "version": 3}, format="json"
    )
    assert stale.status_code == 409
    promoted = api.post(
        "/api/v1/policies/least/shadow/promote", {"message": "go", "version": 2}, format="json"
    )
    assert promoted.status_code == 200, promoted.content
    assert (promoted.json()["number"], promoted.json()["active"]) == (2, True)
    assert api.post("/api/v1/policies/least/shadow/discard", {}, format="json").status_code == 409


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("extender")
def test_the_cli_publishes_a_shadow_served_by_every_process_when_it_returns():
    publisher = make_user("pub", "publisher")
    policy = services.policy_create(actor=publisher, document=document())
    services.policy_publish(
        actor=publisher, policy=policy, message="v1", revision=policy.draft_revision
    )
    _draft(Policy.objects.get(pk=policy.pk), document().replace("test policy", "v2"))
    code, out, _ = _cli("publish", "least", "--shadow", "-m", "try v2")
    assert code == 0 and out.startswith("published least v2 as its shadow (0 test cases passed)")
    assert _served_labels() == ("least/v1", "least/v2")
    with pytest.raises(CommandError, match="least: a message is required"):
        _cli("shadow", "promote", "least")


@pytest.mark.django_db(transaction=True)
def test_the_cli_promotes_and_discards_and_exits_3_when_a_process_did_not_confirm(stalled):
    # `stalled`: a second extender process that reported a moment ago and confirms nothing
    publisher = make_user("pub", "publisher")
    _active_and_shadow(publisher)
    code, out, err = _cli("shadow", "promote", "least", "-m", "v2 is right")
    assert code == 3 and out.startswith("promoted least v2 to active")
    assert f"not confirmed: {stalled}" in err
    assert _served_labels() == ("least/v2", None)  # the change is made all the same
    with pytest.raises(CommandError, match="least: policy least has no shadow version"):
        _cli("shadow", "discard", "least")


@pytest.mark.django_db
def test_recent_changes_say_each_shadow_step_in_words():
    import re

    from tests.conftest import client_for

    publisher = make_user("pub", "publisher")
    policy = _active_and_shadow(publisher)
    policy_shadow_promote(actor=publisher, policy=policy, message="v2 rejects nothing new")
    policy = _draft(Policy.objects.get(pk=policy.pk), document().replace("test policy", "v3"))
    services.policy_publish(
        actor=publisher, policy=policy, message="v3", revision=policy.draft_revision, shadow=True
    )
    policy_shadow_discard(actor=publisher, policy=policy, message="too strict")
    feed = client_for("viewer").get("/").content.decode().split('id="recent-audit"', 1)[1]
    text = " ".join(re.sub(r"<[^>]+>", " ", feed.split("</section>", 1)[0]).split())
    assert "pub published a shadow version of least v2 try v2 beside v1" in text
    assert "pub promoted the shadow version of least v2 v2 rejects nothing new" in text
    assert "pub ended the shadow version of least v3 discarded: too strict" in text


@pytest.mark.django_db
def test_a_huge_shadow_document_is_refused_as_publish_refuses_it():
    from policies.engine.document import MAX_DOCUMENT_BYTES, PolicyInvalid

    publisher = make_user("pub", "publisher")
    policy = services.policy_create(actor=publisher, document=document())
    services.policy_publish(
        actor=publisher, policy=policy, message="v1", revision=policy.draft_revision
    )
    # a draft past the limit (written around the draft's own check, as an old row could be)
    huge = document() + "# " + "x" * MAX_DOCUMENT_BYTES + "\n"
    policy = _draft(Policy.objects.get(pk=policy.pk), huge)
    refusals = []
    for shadow in (False, True):
        with pytest.raises(PolicyInvalid) as raised:
            services.policy_publish(
                actor=publisher,
                policy=policy,
                message="m",
                revision=policy.draft_revision,
                shadow=shadow,
            )
        refusals.append([e.to_dict() for e in raised.value.errors])
    assert refusals[0] == refusals[1]
    assert refusals[0][0]["message"] == "the document is larger than 256 KiB"
    assert policy.versions.count() == 1
