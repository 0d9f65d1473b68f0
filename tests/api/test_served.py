"""Publish, rollback and deactivate return once every live extender process serves the change,
and the REST answer, the page and the CLI say which processes have not confirmed (issue 24).

An extender runtime runs in this process (role listener, its thread pushed by Redis database 14,
as in a worker of the extender's listener); a process that never confirms is a record in the
served hash that nothing updates.
"""

from __future__ import annotations

import io
import time

import pytest
from django.core.management import call_command
from django.db import transaction

from policies import services
from policies.extender import runtime as runtime_module
from policies.extender.runtime import reset_runtime, runtime
from policies.models import AuditEvent, Policy
from policies.publishing import served_record
from tests.conftest import make_user
from tests.redisdb import redis_database

from .conftest import document

STALLED = "stalled-host:4242"


@pytest.fixture
def extender(settings, monkeypatch, eager_celery):
    """This process's extender runtime, reporting what it serves; the Redis it listens on."""
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    settings.SCHEDWEB_PUBLISH_CONFIRM_SECONDS = 60.0  # a confirmation ends the wait, not time
    monkeypatch.setattr(runtime_module, "_role", "listener")
    with redis_database(settings, 14) as client:
        reset_runtime()
        runtime()
        yield client
        reset_runtime()


@pytest.fixture
def stalled(extender, settings):
    """A second extender process that stopped (SIGSTOP, a long GC): it reported a moment ago
    and will not confirm anything."""
    settings.SCHEDWEB_PUBLISH_CONFIRM_SECONDS = 0.3
    served_record(
        extender,
        {
            "process": STALLED,
            "role": "listener",
            "counter": 0,
            "policies": {},
            "at": time.time() + 3600,  # live for the whole test, however slow the machine
        },
        confirm=False,
    )
    return STALLED


def _published(name: str = "least", *, versions: int = 1) -> Policy:
    """A policy with `versions` published versions, the last one active."""
    publisher = make_user("pub", "publisher")
    policy = services.policy_create(actor=publisher, document=document(name=name))
    for number in range(1, versions + 1):
        text = document(name=name).replace("test policy", f"v{number}")
        Policy.objects.filter(pk=policy.pk).update(draft=text)
        policy = Policy.objects.get(pk=policy.pk)
        services.policy_publish(
            actor=publisher, policy=policy, message=f"v{number}", revision=policy.draft_revision
        )
    return Policy.objects.get(pk=policy.pk)


@pytest.mark.django_db(transaction=True)
def test_a_publish_returns_once_every_extender_process_serves_the_new_version(extender):
    publisher = make_user("pub", "publisher")
    policy = services.policy_create(actor=publisher, document=document())
    result = services.policy_publish(
        actor=publisher, policy=policy, message="v1", revision=policy.draft_revision
    )
    # when the call returns, this process's extender answers with v1 already
    assert runtime().registry.by_scheduler["schedweb"].label == "least/v1"
    assert result.served.served_by_all and result.served.confirmed == (runtime().process,)
    assert result.served.summary().startswith("served by the 1 extender process (confirmed in")


@pytest.mark.django_db(transaction=True)
def test_a_rollback_and_a_deactivation_return_once_every_process_serves_them(extender):
    policy = _published(versions=2)
    publisher = make_user("pub2", "publisher")
    assert runtime().registry.by_scheduler["schedweb"].label == "least/v2"
    rolled = services.policy_rollback(actor=publisher, policy=policy, number=1)
    assert rolled.served.served_by_all
    assert runtime().registry.by_scheduler["schedweb"].label == "least/v1"
    off = services.policy_deactivate(actor=publisher, policy=policy)
    assert off.served_by_all and runtime().registry.by_scheduler == {}


@pytest.mark.django_db(transaction=True)
def test_a_rollback_names_the_processes_that_did_not_confirm_in_time(stalled):
    policy = _published(versions=2)
    publisher = make_user("pub2", "publisher")
    result = services.policy_rollback(actor=publisher, policy=policy, number=1)
    assert not result.served.served_by_all
    assert result.served.confirmed == (runtime().process,)
    assert [p["process"] for p in result.served.pending] == [stalled]
    assert "not confirmed within 0.3 s by 1 of 2 extender processes: stalled-host:4242" in (
        result.served.summary()
    )


@pytest.mark.django_db
def test_a_publish_inside_a_transaction_says_it_is_distributed_at_commit(extender):
    publisher = make_user("pub", "publisher")
    policy = services.policy_create(actor=publisher, document=document())
    with transaction.atomic():
        result = services.policy_publish(
            actor=publisher, policy=policy, message="v1", revision=policy.draft_revision
        )
    assert result.served.counter is None and not result.served.served_by_all
    assert result.served.summary().startswith("not distributed yet")


@pytest.mark.django_db(transaction=True)
def test_the_rest_answers_say_which_extender_processes_serve_the_change(stalled, settings):
    from tests.conftest import token_client

    api = token_client(make_user("pub", "publisher"))
    created = api.post("/api/v1/policies", {"document": document()}, format="json").json()
    published = api.post(
        "/api/v1/policies/least/publish",
        {"message": "v1"},
        format="json",
        HTTP_IF_MATCH=created["etag"],
    )
    assert published.status_code == 201, published.content
    served = published.json()["served"]
    assert served["servedByAll"] is False and served["processes"] == 2
    assert served["confirmed"] == [runtime().process]
    assert served["notConfirmed"][0]["process"] == stalled
    assert served["notConfirmed"][0]["counter"] == 0
    assert served["counter"] > 0 and served["waitedSeconds"] >= 0.3
    assert stalled in served["summary"]

    settings.SCHEDWEB_PUBLISH_CONFIRM_SECONDS = 60.0
    # the stalled process leaves (its record removed): the others are all there is
    assert runtime().redis.hdel("schedweb:extenders:served", stalled) == 1
    off = api.post("/api/v1/policies/least/deactivate", format="json")
    assert off.status_code == 200 and off.json()["served"]["servedByAll"] is True
    assert off.json()["activeVersion"] is None
    back = api.post("/api/v1/policies/least/rollback", {"version": 1}, format="json")
    assert back.status_code == 200 and back.json()["number"] == 1
    assert back.json()["served"]["confirmed"] == [runtime().process]


@pytest.mark.django_db(transaction=True)
def test_the_page_warns_which_processes_did_not_confirm_a_rollback(stalled, client):
    _published(versions=2)
    client.force_login(make_user("rob", "publisher"))
    response = client.post("/policies/least/rollback", {"number": "1"}, follow=True)
    toasts = [(m.level_tag, str(m)) for m in response.context["messages"]]
    assert len(toasts) == 1 and toasts[0][0] == "warning"
    assert toasts[0][1].startswith("Rolled back least to v1; not confirmed within 0.3 s by 1 of 2")
    assert stalled in toasts[0][1]


@pytest.mark.django_db(transaction=True)
def test_the_page_says_a_deactivation_is_served_by_every_process(extender, client):
    _published()
    client.force_login(make_user("rob", "publisher"))
    response = client.post("/policies/least/deactivate", follow=True)
    toasts = [(m.level_tag, str(m)) for m in response.context["messages"]]
    assert len(toasts) == 1 and toasts[0][0] == "success"
    assert toasts[0][1].startswith(
        "Deactivated least: its pods now pass through; served by the 1 extender process"
    )


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("policy", *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.django_db(transaction=True)
def test_the_cli_publishes_rolls_back_and_deactivates_and_says_who_serves_it(extender):
    services.policy_create(actor=None, document=document())
    code, out, err = _cli("publish", "least", "-m", "from CI")
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "published least v1 (0 test cases passed)"
    assert out.splitlines()[1].startswith("served by the 1 extender process")
    assert runtime().registry.by_scheduler["schedweb"].label == "least/v1"
    assert _cli("deactivate", "least")[0] == 0 and runtime().registry.by_scheduler == {}
    code, out, _ = _cli("rollback", "least", "--version", "1")
    assert code == 0 and out.startswith("rolled back least to v1\n")


@pytest.mark.django_db(transaction=True)
def test_the_cli_exits_3_naming_a_process_that_did_not_confirm(stalled):
    services.policy_create(actor=None, document=document())
    code, out, err = _cli("publish", "least", "-m", "from CI")
    assert code == 3 and out == "published least v1 (0 test cases passed)\n"
    assert err.splitlines()[0].startswith("not confirmed within 0.3 s by 1 of 2 extender processes")
    assert err.splitlines()[-1] == f"  not confirmed: {stalled}"


@pytest.mark.django_db(transaction=True)
def test_the_cli_rollback_keeps_its_optional_reason_in_the_audit_log_as_the_page_does(extender):
    _published(versions=2)
    code, out, _ = _cli("rollback", "least", "--version", "1", "-m", "  v2 broke gpu pods  ")
    assert code == 0 and out.startswith("rolled back least to v1\n")
    event = AuditEvent.objects.get(action="policy.rollback")
    assert (event.version, event.detail["message"]) == (1, "v2 broke gpu pods")
    assert _cli("rollback", "least", "--version", "2")[0] == 0  # no reason: none recorded
    assert "message" not in AuditEvent.objects.filter(action="policy.rollback").latest("pk").detail


@pytest.mark.django_db(transaction=True)
def test_the_cli_refuses_a_rollback_reason_over_2000_characters_and_changes_nothing(extender):
    from django.core.management.base import CommandError

    from policies.selectors import policy_get_active

    policy = _published(versions=2)
    with pytest.raises(CommandError, match="least: the rollback reason is longer than 2000"):
        call_command("policy", "rollback", "least", "--version", "1", "--message", "x" * 2001)
    assert policy_get_active(policy=policy).number == 2
    assert not AuditEvent.objects.filter(action="policy.rollback").exists()


@pytest.mark.django_db
def test_the_cli_refuses_an_unknown_policy_and_a_failing_publish_with_a_clear_error(extender):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no policy named 'nope'"):
        call_command("policy", "deactivate", "nope")
    services.policy_create(actor=None, document=document())
    with pytest.raises(CommandError, match="least: policy least is not active"):
        call_command("policy", "deactivate", "least")
    with pytest.raises(CommandError, match="least: policy least has no version 4"):
        call_command("policy", "rollback", "least", "--version", "4")
