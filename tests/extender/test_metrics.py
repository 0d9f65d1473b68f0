"""The extender's counters: kept by each process, summed over a listener's workers through their
files, rendered exactly; Redis only receives the dashboard's per-minute buckets."""

from __future__ import annotations

import pytest
import redis

from policies.extender.metrics import Metrics, metrics_dir_prepare, render_prometheus
from tests.harness.processes import free_ports
from tests.prometheus_text import assert_valid_exposition


def observe(metrics: Metrics, count: int, **labels) -> None:
    for _ in range(count):
        metrics.observe(verb="filter", code=200, seconds=0.0008, **labels)


def test_the_listener_sum_adds_the_other_workers_files_to_this_process(tmp_path):
    other = Metrics(directory=tmp_path)
    other.pid = 4242  # another worker of the same listener
    observe(other, 3)
    other.write()
    own = Metrics(directory=tmp_path)
    observe(own, 2, policy="p", version=1)  # not written yet: read from memory
    totals = own.listener_totals()
    assert totals["requests|filter|200"] == 5
    assert totals["passthrough|filter"] == 3 and totals["decisions|p|1|filter"] == 2
    metrics_dir_prepare(tmp_path)  # a new start of the listener: from zero
    assert own.listener_totals()["requests|filter|200"] == 2


def test_a_process_reusing_a_dead_workers_pid_continues_its_counts(tmp_path):
    first = Metrics(directory=tmp_path)
    observe(first, 4)
    first.write()
    again = Metrics(directory=tmp_path)  # same pid, same file
    observe(again, 1)
    assert again.totals()["requests|filter|200"] == 5


def test_redis_down_loses_no_count():
    down = redis.Redis(host="127.0.0.1", port=free_ports(count=1)[0], socket_connect_timeout=1)
    metrics = Metrics()
    observe(metrics, 2)
    with pytest.raises(redis.ConnectionError):
        metrics.flush(down)
    observe(metrics, 1)
    assert metrics.totals()["requests|filter|200"] == 3


def test_the_exposition_writes_large_counts_exactly_and_escapes_labels():
    totals = {
        "requests|filter|200": 1234567.0,
        'decisions|a"b\\c|1|filter': 2.0,
        "latency_bucket|filter|0.001": 1234567.0,
        "latency_sum|filter": 0.5,
        "latency_count|filter": 1234567.0,
    }
    text = render_prometheus(totals, gauges={"schedweb_snapshot_age_seconds": 1.25})
    assert 'schedweb_extender_requests_total{verb="filter",code="200"} 1234567\n' in text
    assert 'policy="a\\"b\\\\c"' in text
    assert "schedweb_snapshot_age_seconds 1.25\n" in text
    assert_valid_exposition(text)
