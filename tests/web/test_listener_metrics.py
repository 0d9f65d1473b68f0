"""/metrics on the extender listener as a real server with two worker processes: each scrape, by
whichever worker answers, reports the listener's sum; the counts live in the processes (and
their files), so a Redis restart loses none; the text is valid Prometheus exposition."""

from __future__ import annotations

import contextlib
import http.client
import json
import time
from pathlib import Path

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


def files_total(metrics_dir: Path, key: str) -> float:
    """`key` summed over the workers' files (what every worker adds to its own count)."""
    total = 0.0
    for path in metrics_dir.glob("extender-*.json"):
        with contextlib.suppress(OSError, ValueError):  # a file being replaced
            total += float(json.loads(path.read_text()).get(key, 0))
    return total


def scrape_until(
    port: int,
    series: str,
    value: float,
    *,
    metrics_dir: Path | None = None,
    file_key: str = "requests|filter|200",
    timeout: float = 20.0,
) -> str:
    """Scrapes until `series` reads `value` (the workers write their files about once a
    second), then 8 more times: every answer, whichever worker gives it, must read it. With
    `metrics_dir`, first waits until the workers' files add up to `value`: a worker's answer
    counts its own requests from memory but the others' from their files, so until every
    worker wrote its file the answers can differ (a race of the test, not of the product)."""
    deadline = time.monotonic() + timeout
    if metrics_dir is not None:
        while files_total(metrics_dir, file_key) != value:
            assert time.monotonic() < deadline, f"the workers' files do not add up to {value}"
            time.sleep(0.1)
    while True:
        status, text = get(port, "GET", "/metrics")
        assert status == 200
        if sample(text, series) == value:
            break
        assert time.monotonic() < deadline, f"{series} is {sample(text, series)}, not {value}"
        time.sleep(0.1)
    for _ in range(8):
        assert sample(get(port, "GET", "/metrics")[1], series) == value
    return text


def test_counts_add_up_over_the_workers_and_survive_a_redis_restart(listener):
    port, redis, metrics_dir = listener
    for _ in range(30):
        assert get(port, "POST", "/extender/filter", FILTER)[0] == 200
    scrape_until(port, REQUESTS, 30, metrics_dir=metrics_dir)
    deadline = time.monotonic() + 20
    while not list(metrics_dir.glob("extender-*.json")):  # each worker that counted writes one
        assert time.monotonic() < deadline, "no worker wrote its counts"
        time.sleep(0.1)

    redis.stop()  # an empty Redis comes back: nothing of the counts was there
    redis.start()
    text = scrape_until(port, REQUESTS, 30, metrics_dir=metrics_dir)
    assert sample(text, 'schedweb_extender_passthrough_total{verb="filter"}') == 30

    for _ in range(5):
        assert get(port, "POST", "/extender/filter", FILTER)[0] == 200
    text = scrape_until(port, REQUESTS, 35, metrics_dir=metrics_dir)
    assert_valid_exposition(text)
    assert sample(text, 'schedweb_extender_request_duration_seconds_count{verb="filter"}') == 35
