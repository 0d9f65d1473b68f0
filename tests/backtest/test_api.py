"""POST /api/v1/backtests and GET /api/v1/backtests/<job>: roles, bounds, the job path, pages."""

from __future__ import annotations

from unittest import mock

import pytest

from policies.backtest import jobs, run
from policies.tasks.previews import backtest_run
from tests.backtest.conftest import BIN_PACKING, pending_schedweb, with_filter
from tests.conftest import make_user, token_client


@pytest.fixture
def clients(db, published) -> dict:
    users = {role: make_user(f"bt-{role}", role) for role in ("viewer", "editor", "publisher")}
    return {role: token_client(user) for role, user in users.items()}


def post(client, body: dict):
    return client.post("/api/v1/backtests", body, format="json")


def test_an_editor_backtests_the_policys_draft_and_gets_the_result_at_once(
    clients, recorded, isolated_redis
):
    response = post(clients["editor"], {"policy": "bin-packing"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "done" and body["version"] == "draft"
    summary = body["result"]["summary"]
    assert summary["recorded"] == len(recorded) and summary["counts"][run.SAME] == len(recorded)
    assert body["result"]["count"] == len(recorded) + len(pending_schedweb())


def test_a_pasted_document_that_rejects_the_bound_node_lists_the_moved_pods(
    clients, recorded, isolated_redis
):
    busiest = max(set(recorded.values()), key=list(recorded.values()).count)
    moved = sorted(uid for uid, node in recorded.items() if node == busiest)
    document = with_filter(BIN_PACKING, f'node.name != "{busiest}"')
    body = post(clients["publisher"], {"document": document}).json()
    rows = body["result"]["rows"]
    assert sorted(r["uid"] for r in rows if r["class"] == run.MOVED) == moved
    assert body["result"]["summary"]["counts"][run.MOVED] == len(moved)
    assert body["version"] == "document"


def test_viewers_may_not_start_a_backtest(clients, isolated_redis):
    response = post(clients["viewer"], {"policy": "bin-packing"})
    assert response.status_code == 403
    assert response.json()["error"] == "permission_denied"


@pytest.mark.parametrize("last", [0, 2001, "ten", 1.5, True, None, [1]])
def test_a_bad_last_is_a_400_with_the_field_path(clients, last, isolated_redis):
    response = post(clients["editor"], {"policy": "bin-packing", "last": last})
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"] == "invalid"
    assert [e["path"] for e in body["errors"]] == ["last"]


def test_an_invalid_document_is_a_400_with_line_and_column(clients, isolated_redis):
    response = post(clients["editor"], {"document": with_filter(BIN_PACKING, "node.name +")})
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid_policy"
    error = body["errors"][0]
    assert error["path"] == "filters[0].expression" and error["line"] and error["column"]


def test_an_unknown_policy_or_version_is_a_404(clients, isolated_redis):
    assert post(clients["editor"], {"policy": "nope"}).status_code == 404
    response = post(clients["editor"], {"policy": "bin-packing", "version": "9"})
    assert response.status_code == 404


def test_a_policy_without_decisions_answers_an_empty_result_that_says_so(clients, isolated_redis):
    document = BIN_PACKING.replace("[schedweb]", "[nobody]")
    body = post(clients["editor"], {"document": document}).json()
    assert body["result"]["rows"] == [] and body["result"]["count"] == 0
    assert "no decisions are recorded for schedulerNames nobody" in body["result"]["empty"]


def test_a_large_backtest_answers_202_and_is_polled_until_the_worker_has_run_it(
    clients, recorded, isolated_redis
):
    with mock.patch.object(jobs, "INLINE_MAX_PODS", 0), mock.patch.object(backtest_run, "delay"):
        response = post(clients["editor"], {"policy": "bin-packing", "version": "active"})
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "queued" and body["result"] is None
    poll = body["poll"]
    assert clients["editor"].get(poll).json()["status"] == "queued"
    backtest_run(body["job"])  # what the worker does
    done = clients["editor"].get(poll).json()
    assert done["status"] == "done" and done["version"] == "v1"
    assert done["result"]["summary"]["counts"][run.SAME] == len(recorded)


def test_the_job_path_with_an_eager_celery_task(clients, recorded, isolated_redis, eager_celery):
    with mock.patch.object(jobs, "INLINE_MAX_PODS", 0):
        response = post(clients["editor"], {"document": with_filter(BIN_PACKING, "false")})
    assert response.status_code == 200  # eager: done by the time the request answers
    counts = response.json()["result"]["summary"]["counts"]
    assert counts[run.UNSCHEDULABLE] == len(recorded)


def test_rows_are_paged_and_can_be_limited_to_the_pods_that_differ(
    clients, recorded, isolated_redis
):
    job = post(clients["editor"], {"policy": "bin-packing"}).json()["job"]
    total = len(recorded) + len(pending_schedweb())
    first = clients["editor"].get(f"/api/v1/backtests/{job}?limit=3").json()["result"]
    rest = clients["editor"].get(f"/api/v1/backtests/{job}?offset=3&limit=500").json()["result"]
    assert first["count"] == rest["count"] == total
    assert len(first["rows"]) == 3 and len(first["rows"]) + len(rest["rows"]) == total
    differ = clients["editor"].get(f"/api/v1/backtests/{job}?differ=1").json()["result"]
    assert {r["class"] for r in differ["rows"]} <= run.DIFFERS
    assert differ["count"] == differ["summary"]["differ"]


@pytest.mark.parametrize("query", ["limit=0", "limit=501", "offset=-1", "limit=x"])
def test_a_bad_page_is_a_400_with_the_field_path(clients, recorded, isolated_redis, query):
    job = post(clients["editor"], {"policy": "bin-packing"}).json()["job"]
    response = clients["editor"].get(f"/api/v1/backtests/{job}?{query}")
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == query.split("=")[0]


def test_someone_elses_backtest_does_not_exist_for_you(clients, isolated_redis):
    job = post(clients["editor"], {"policy": "bin-packing"}).json()["job"]
    assert clients["publisher"].get(f"/api/v1/backtests/{job}").status_code == 404
    assert clients["viewer"].get(f"/api/v1/backtests/{'0' * 32}").status_code == 404
    assert clients["editor"].get("/api/v1/backtests/..%2f..").status_code == 404


def test_each_request_is_charged_by_its_size_and_refused_past_the_budget(
    clients, recorded, isolated_redis, settings
):
    size = len(recorded) + len(pending_schedweb())
    settings.SCHEDWEB_BACKTEST_PODS_PER_WINDOW = size * 2
    assert post(clients["editor"], {"policy": "bin-packing"}).status_code == 200
    assert post(clients["editor"], {"policy": "bin-packing"}).status_code == 200
    refused = post(clients["editor"], {"policy": "bin-packing"})
    assert refused.status_code == 429 and refused.json()["error"] == "throttled"
    assert int(refused["Retry-After"]) > 0
    assert f"this one needs {size}" in refused.json()["detail"]
    # the budget is the user's own: another editor still runs one
    assert post(clients["publisher"], {"policy": "bin-packing"}).status_code == 200


def test_without_redis_the_work_is_not_charged_and_not_refused(settings):
    from policies import throttle
    from policies.redis import redis_client

    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    redis_client.cache_clear()
    try:
        assert throttle.work_charge(kind="backtest", user_id=1, units=10**6, limit=1) == 0
    finally:
        redis_client.cache_clear()
