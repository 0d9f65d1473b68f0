"""The versions page's Backtest section: start, poll, counts and the pods that would differ."""

from __future__ import annotations

import re
from unittest import mock

import pytest

from policies.backtest import jobs
from policies.tasks.previews import backtest_run
from tests.backtest.conftest import BIN_PACKING, with_filter
from tests.conftest import client_for

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def editor_client(db, published):
    return client_for("editor", "bt-editor")


def start(client, **form):
    return client.post("/policies/bin-packing/backtest", form, **HTMX)


def set_draft(policy, document: str) -> None:
    from policies import services

    services.policy_update_draft(
        actor=policy.owner, policy=policy, document=document, if_match=policy.etag
    )


def test_the_versions_page_offers_a_backtest_to_editors_and_not_to_viewers(published, db):
    html = client_for("editor", "bt-e").get("/policies/bin-packing/versions/").content.decode()
    assert 'id="backtest-form"' in html and 'value="1">v1 (active)</option>' in html
    viewer = client_for("viewer", "bt-v").get("/policies/bin-packing/versions/").content.decode()
    assert 'id="backtest-form"' not in viewer
    assert start(client_for("viewer", "bt-v2")).status_code == 403


def test_a_draft_that_rejects_every_node_lists_every_recorded_pod_first(
    editor_client, published, recorded, isolated_redis
):
    set_draft(published, with_filter(BIN_PACKING, "false"))
    html = start(editor_client).content.decode()
    assert 'data-status="done"' in html
    summary = re.search(r'id="backtest-summary">(.*?)</p>', html, re.S).group(1)
    assert f"<strong>{len(recorded)}</strong> recorded pods" in summary
    rows = re.findall(r'<li data-class="([^"]+)" data-pod="([^"]+)">', html)
    assert [c for c, _ in rows] == ["newly-unschedulable"] * len(recorded)
    assert 'data-class="newly-unschedulable"><span class="badge badge--reject">4</span>' in html
    # each row opens to both breakdowns: the record (with a link to every node) and now
    for node in recorded.values():
        assert f'Bound to <span class="mono">{node}</span>.' in html
    assert html.count(">Every node's breakdown</a>") == len(recorded)
    assert "is judged without itself on its node" in html  # the limit, said plainly


def test_a_version_and_last_are_taken_from_the_form(
    editor_client, published, recorded, isolated_redis
):
    html = start(editor_client, version="1", last="2").content.decode()
    assert "The v1 of <strong>bin-packing</strong> over <strong>2</strong> recorded pods" in html


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"last": "0"}, "last: from 1 to 2000, got 0"),
        ({"last": "lots"}, "last: a whole number from 1 to 2000"),
        ({"version": "9"}, "bin-packing has no version &#x27;9&#x27;"),
    ],
)
def test_bad_input_is_said_in_words_with_a_status_htmx_swaps(
    editor_client, isolated_redis, form, message
):
    response = start(editor_client, **form)
    assert response.status_code == 422
    assert message in response.content.decode()


def test_a_large_backtest_is_polled_until_the_worker_has_run_it(
    editor_client, recorded, isolated_redis
):
    with mock.patch.object(jobs, "INLINE_MAX_PODS", 0), mock.patch.object(backtest_run, "delay"):
        html = start(editor_client).content.decode()
    assert 'data-status="queued"' in html and 'hx-trigger="every 500ms"' in html
    poll = re.search(r'hx-get="([^"]+)"', html).group(1)
    backtest_run(poll.rstrip("/").split("/")[-1].replace("-", ""))  # what the worker does
    done = editor_client.get(poll, **HTMX).content.decode()
    assert 'data-status="done"' in done and "every 500ms" not in done
    # someone else polling it learns nothing
    other = client_for("editor", "bt-other").get(poll, **HTMX)
    assert other.status_code == 422 and "unknown or expired" in other.content.decode()
