"""/metrics on the extender listener as a real server with two worker processes: each scrape, by
whichever worker answers, reports the listener's sum; the counts live in the processes (and
their files), so a Redis restart loses none; the text is valid Prometheus exposition."""

from __future__ import annotations

import http.client
import time

import orjson
import pytest

from tests.e2e.stack import RedisServer
from tests.listeners import start_extender
from tests.prometheus_text import assert_valid_exposition

FILTER = orjson.dumps(
    {
        "Pod": {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {}},
        "NodeNames": ["cp-1", "a-small-1"],
    }
)
REQUESTS = 'schedweb_extender_requests_total{verb="filter",code="200"}'


@pytest.fixture
def listener(tmp_path):
    """(port, redis, metrics directory) of an extender listener with 2 workers."""
    redis = RedisServer(tmp_path / "redis").start()
    process = None
    try:
        process, port = start_extender(
            tmp_path,
            redis_url=redis.url,
            SCHEDWEB_EXTENDER_WORKERS="2",
            SCHEDWEB_METRICS_DIR=str(tmp_path / "metrics"),
        )
        yield port, redis, tmp_path / "metrics"
    finally:
        if process is not None:
            process.stop(grace=5)
        redis.stop()


def get(port: int, method: str, path: str, body: bytes = b"") -> tuple[int, str]:
    """One request on a connection of its own (so that requests spread over the workers)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, path, body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def sample(text: str, series: str) -> float:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def scrape_until(port: int, series: str, value: float, *, timeout: float = 30.0) -> str:
    """Scrapes until `series` reads `value` in 8 answers in a row, whichever worker gives them.

    A worker adds the other workers' files to its own totals, and each file is written about
    once a second: right after the requests, one worker may already count them all while
    another still reads a sibling's older file. The sum must settle on `value` and stay there;
    it must never go past it (counters only count what was sent)."""
    deadline = time.monotonic() + timeout
    in_a_row = 0
    while True:
        status, text = get(port, "GET", "/metrics")
        assert status == 200
        seen = sample(text, series)
        assert seen <= value, f"{series} is {seen}, more than the {value} sent"
        in_a_row = in_a_row + 1 if seen == value else 0
        if in_a_row == 8:
            return text
        assert time.monotonic() < deadline, f"{series} is {seen}, not {value} (8 scrapes in a row)"
        if in_a_row == 0:
            time.sleep(0.1)


def test_counts_add_up_over_the_workers_and_survive_a_redis_restart(listener):
    port, redis, metrics_dir = listener
    for _ in range(30):
        assert get(port, "POST", "/extender/filter", FILTER)[0] == 200
    scrape_until(port, REQUESTS, 30)
    deadline = time.monotonic() + 20
    while not list(metrics_dir.glob("extender-*.json")):  # each worker that counted writes one
        assert time.monotonic() < deadline, "no worker wrote its counts"
        time.sleep(0.1)

    redis.stop()  # an empty Redis comes back: nothing of the counts was there
    redis.start()
    text = scrape_until(port, REQUESTS, 30)
    assert sample(text, 'schedweb_extender_passthrough_total{verb="filter"}') == 30

    for _ in range(5):
        assert get(port, "POST", "/extender/filter", FILTER)[0] == 200
    text = scrape_until(port, REQUESTS, 35)
    assert_valid_exposition(text)
    assert sample(text, 'schedweb_extender_request_duration_seconds_count{verb="filter"}') == 35
