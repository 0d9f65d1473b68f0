"""A canary through the REST API and the CLI (issue 25, item 3): publishers start, promote and
abort it; viewers read its status; a share, selector or guard out of range is a 400 naming the
field, and nothing is published."""

from __future__ import annotations

import pytest
from django.core.management import CommandError

from policies import services
from policies.models import Policy, PolicyActivation
from tests.api.conftest import document
from tests.api.test_served import _cli
from tests.conftest import make_user
from tests.redisdb import redis_database

from .test_canary_lifecycle import _active_and_canary
from .test_shadow_lifecycle import _draft

PUBLISH = "/api/v1/policies/least/publish"


def _publish(client, policy: Policy, canary) -> object:
    return client.post(
        PUBLISH,
        {"message": "v2 for some", "canary": canary},
        format="json",
        HTTP_IF_MATCH=policy.etag,
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("canary", "path"),
    [
        ({"percent": 0}, "canary.percent"),
        ({"percent": 100}, "canary.percent"),
        ({"percent": "1e9"}, "canary.percent"),
        ({"selector": "team in (a"}, "canary.selector"),
        ({"selector": "a=b", "percent": 5}, "canary"),
        ({"percent": 5, "guard": {"rejectedRate": 500}}, "canary.guard.rejectedRate"),
        ({"percent": 5, "guard": {"minPods": -3}}, "canary.guard.minPods"),
        ({"percent": 5, "promoteAfterSeconds": 10**12}, "canary.promoteAfterSeconds"),
        ({"percent": 5, "steer": "me"}, "canary.steer"),
        ([5], "canary"),
        ("20%", "canary"),
    ],
)
def test_a_canary_out_of_range_or_malformed_is_a_400_naming_the_field(
    users_and_policy, canary, path
):
    clients, policy = users_and_policy
    policy = _draft(policy, document().replace("test policy", "v2"))
    response = _publish(clients["publisher"], policy, canary)
    assert response.status_code == 400, response.content
    assert response.json()["errors"][0]["path"] == path
    assert policy.versions.count() == 1  # nothing was published


@pytest.mark.django_db
def test_the_rest_api_starts_shows_promotes_and_aborts_a_canary(users_and_policy, settings):
    clients, policy = users_and_policy
    with redis_database(settings, 14):  # the counts the status reads
        _rest_lifecycle(clients, policy)


def _rest_lifecycle(clients, policy) -> None:
    api, viewer = clients["publisher"], clients["viewer"]
    policy = _draft(policy, document().replace("test policy", "v2"))
    published = _publish(
        api, policy, {"percent": "20%", "guard": {"minPods": 50}, "promoteAfterSeconds": 3600}
    )
    assert published.status_code == 201, published.content
    body = published.json()
    assert (body["role"], body["version"]["number"], body["version"]["active"]) == (
        "canary",
        2,
        False,
    )
    status = viewer.get("/api/v1/policies/least/canary")
    assert status.status_code == 200
    canary = status.json()["canary"]
    assert (canary["version"], canary["stable"], canary["share"], canary["guard"]["minPods"]) == (
        2,
        1,
        {"percent": 20.0},
        50,
    )
    assert canary["promoteAfterSeconds"] == 3600
    assert canary["arms"]["canary"]["judged"] == 0
    for action in ("promote", "abort"):
        assert viewer.post(f"/api/v1/policies/least/canary/{action}", {}).status_code == 403
    stale = api.post("/api/v1/policies/least/canary/promote", {"version": 3}, format="json")
    assert stale.status_code == 409
    promoted = api.post("/api/v1/policies/least/canary/promote", {"version": 2}, format="json")
    assert promoted.status_code == 200, promoted.content
    assert (promoted.json()["number"], promoted.json()["active"]) == (2, True)
    assert viewer.get("/api/v1/policies/least/canary").json()["canary"] is None
    assert api.post("/api/v1/policies/least/canary/abort", {}, format="json").status_code == 409


@pytest.mark.django_db
def test_only_publishers_start_a_canary(users_and_policy):
    clients, policy = users_and_policy
    for role in ("viewer", "editor"):
        assert _publish(clients[role], policy, {"percent": 5}).status_code == 403


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("extender")
def test_the_cli_publishes_a_canary_and_aborts_it():
    publisher = make_user("pub", "publisher")
    policy = services.policy_create(actor=publisher, document=document())
    services.policy_publish(
        actor=publisher, policy=policy, message="v1", revision=policy.draft_revision
    )
    _draft(Policy.objects.get(pk=policy.pk), document().replace("test policy", "v2"))
    with pytest.raises(CommandError, match=r"least: canary\.percent: must be between 1 and 99"):
        _cli("publish", "least", "--canary", "150%", "-m", "too much")
    with pytest.raises(CommandError, match=r"canary\.promoteAfterSeconds: '1 week' is not a dur"):
        _cli("publish", "least", "--canary", "20%", "--promote-after", "1 week", "-m", "m")
    with pytest.raises(CommandError, match="go with --canary"):
        _cli("publish", "least", "--guard-min-pods", "5", "-m", "m")
    code, out, _ = _cli(
        "publish",
        "least",
        "--canary-selector",
        "team=a",
        "--guard-rejected-rate",
        "2%",
        "--guard-min-pods",
        "30",
        "--promote-after",
        "1h",
        "-m",
        "v2 for team a",
    )
    assert code == 0 and out.startswith("published least v2 as a canary (0 test cases passed)")
    rollout = PolicyActivation.objects.get(role="canary", active=True).rollout
    assert rollout == {
        "share": {"selector": "team=a"},
        "guard": {"rejectedRate": 2.0, "errorRate": 5.0, "minPods": 30},
        "promoteAfterSeconds": 3600,
    }
    code, out, _ = _cli("canary", "status", "least")
    assert code == 0 and '"selector": "team=a"' in out
    code, out, _ = _cli("canary", "abort", "least", "-m", "not yet")
    assert code == 0 and out.startswith("aborted the canary of least: the stable version decides")
    assert not PolicyActivation.objects.filter(role="canary", active=True).exists()


@pytest.mark.django_db(transaction=True)
def test_the_cli_promotes_and_exits_3_when_a_process_did_not_confirm(stalled):
    # `stalled`: a second extender process that reported a moment ago and confirms nothing
    _active_and_canary(make_user("pub", "publisher"))
    code, out, err = _cli("canary", "promote", "least", "-m", "a quiet day")
    assert code == 3 and out.startswith("promoted least v2 to active")
    assert f"not confirmed: {stalled}" in err
    assert PolicyActivation.objects.get(role="active", active=True).version.number == 2
    with pytest.raises(CommandError, match="least: policy least has no canary in flight"):
        _cli("canary", "abort", "least")
