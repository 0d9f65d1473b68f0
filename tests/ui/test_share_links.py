"""Share links: what one user sees in the playground opens the same for another, until it
expires; bounded, never a 500, never a change to the draft."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from policies import services
from policies.models import AuditEvent, Policy, SharedPreview
from tests.conftest import client_for, make_user

pytestmark = pytest.mark.django_db
EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def demo(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"


@pytest.fixture
def policy() -> Policy:
    editor = make_user("ed", "editor")
    return services.policy_create(
        actor=editor, document=(EXAMPLES / "seed-003-name-length.yaml").read_text()
    )


def _share(client: Client, document: str, pod: str = "default/abc") -> str:
    answer = client.post(
        "/policies/seed-003-name-length/share", {"document": document, "pod": pod}, **HTMX
    )
    assert answer.status_code == 200, answer.content
    return re.search(
        r'id="share-url" value="http://testserver/s/([^/]+)/"', answer.content.decode()
    ).group(1)


def test_a_shared_playground_opens_for_a_viewer_with_the_same_text_and_pod(policy):
    edited = policy.draft.replace("size(pod.name) < 5", "size(pod.name) < 9")
    token = _share(client_for("editor", "sharer"), edited)
    viewer = client_for("viewer", "looker")
    opened = viewer.get(f"/s/{token}/")
    assert (
        opened.status_code == 302
        and opened["Location"] == f"/policies/{policy.name}/?share={token}"
    )
    page = viewer.get(opened["Location"]).content.decode()
    assert "size(pod.name) &lt; 9" in page  # the shared text is in the editor
    assert 'id="share-banner"' in page and "Shared by <strong>sharer</strong>" in page
    assert '<option value="default/abc" selected>' in page
    assert Policy.objects.get(pk=policy.pk).draft == policy.draft  # the draft is untouched
    assert AuditEvent.objects.filter(action="share.create").count() == 1


def test_an_expired_or_unknown_link_is_404_in_words(policy):
    token = _share(client_for("editor"), policy.draft)
    SharedPreview.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    viewer = client_for("viewer")
    for url in (f"/s/{token}/", "/s/no-such-token/", f"/policies/{policy.name}/?share={token}"):
        answer = viewer.get(url)
        assert answer.status_code == 404
    assert b"does not exist or has expired" in viewer.get(f"/s/{token}/").content
    assert services.shares_prune() == 1 and not SharedPreview.objects.exists()


def test_a_link_of_another_policy_does_not_open_here(policy):
    token = _share(client_for("editor"), policy.draft)
    other_doc = (EXAMPLES / "bin-packing.yaml").read_text()
    services.policy_create(actor=make_user("o", "editor"), document=other_doc)
    assert client_for("viewer").get(f"/policies/bin-packing/?share={token}").status_code == 404


def test_a_pod_gone_from_the_cluster_is_previewed_from_the_kept_manifest(policy):
    share = services.share_create(
        actor=make_user("s", "viewer"),
        policy=policy,
        document=policy.draft,
        pod="default/ghost",
        pasted="",
        pod_manifest="metadata: {name: ghost, namespace: default}\nspec: {schedulerName: schedweb}\n",
        cluster="",
        snapshot="demo:0",
        days=1,
    )
    page = (
        client_for("viewer").get(f"/policies/{policy.name}/?share={share.token}").content.decode()
    )
    assert "The pod is gone from the cluster" in page
    assert "default/ghost" in page and "Cannot evaluate" not in page


def test_bad_input_is_refused_with_the_field_and_nothing_is_stored(policy):
    client = client_for("editor")
    big = client.post(
        "/policies/seed-003-name-length/share",
        {"document": "x" * 300_000, "pod": "default/abc"},
        **HTMX,
    )
    assert big.status_code == 400 and b"larger than" in big.content
    assert client.post("/policies/nope/share", {"document": "x"}, **HTMX).status_code == 404
    assert not SharedPreview.objects.exists()


def test_a_user_holds_a_bounded_number_of_open_links(policy, monkeypatch):
    monkeypatch.setattr(services, "MAX_SHARES_PER_USER", 2)
    client = client_for("viewer")
    _share(client, "a")
    _share(client, "b")
    third = client.post("/policies/seed-003-name-length/share", {"document": "c"}, **HTMX)
    assert third.status_code == 409 and b"open share links" in third.content
    assert SharedPreview.objects.count() == 2


def test_signed_out_visitors_and_users_without_a_role_cannot_share_or_open(policy):
    token = _share(client_for("viewer"), policy.draft)
    assert Client().get(f"/s/{token}/").status_code == 302  # to sign in
    nobody = client_for(None)
    assert nobody.get(f"/s/{token}/").status_code == 403
    assert nobody.post("/policies/seed-003-name-length/share", {"document": "x"}).status_code == 403
