"""The shadow version judged in a worker process of the offload pool, off the listener's event
loop (issue 25): the listener answers from the active version and hands the filter body to an
idle worker, which judges the shadow on it (policies/extender/entry.py: shadow_forward).

The listener runs as shipped (as tests/extender/test_offload.py runs it); the counts the
worker makes reach the listener's /metrics through the per-process files."""

from __future__ import annotations

import asyncio
import hashlib
import http.client
import time

import orjson
import pytest

from policies.extender import entry, offload
from policies.publishing import active_entries_write
from tests.prometheus_text import samples
from tests.redisdb import redis_database

from .conftest import active_entry, args_body, example, go_pod, runtime_by_hand
from .test_offload import REDIS_DB, _listener_process, _post

NAME = "seed-003-name-length"
NODES = ["cp-1", "a-small-1"]


def _with_shadow(document: str) -> dict:
    """The published set's entry: `document` as v1, and as its shadow v2 the same document
    that never lets cp-1 through."""
    shadow = document.replace(
        "filters:\n", "filters:\n  - name: not-cp-1\n    expression: node.name != 'cp-1'\n", 1
    )
    assert shadow != document
    entry_ = active_entry(document, 1)
    entry_["shadow"] = {
        "version": 2,
        "document": shadow,
        "contentHash": hashlib.sha256(shadow.encode()).hexdigest(),
        "schedulerNames": entry_["schedulerNames"],
    }
    return entry_


def _shadow_counts(port: int) -> dict[str, float]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
    finally:
        connection.close()
    counts: dict[str, float] = {}
    for name, labels, value in samples(text):
        if name == "schedweb_extender_shadow_judged_total":
            counts[labels["outcome"]] = counts.get(labels["outcome"], 0) + value
        elif name == "schedweb_extender_shadow_skipped_total":
            counts["skipped"] = value
    return counts


@pytest.mark.django_db
def test_the_listener_hands_the_shadow_to_a_worker_which_judges_every_pod(settings, tmp_path):
    with redis_database(settings, REDIS_DB):
        active_entries_write([_with_shadow(example(NAME))])
        with _listener_process(tmp_path, NAME) as port:
            for i in range(4):
                status, answer, policy = _post(port, "filter", args_body(go_pod(f"w{i}"), NODES))
                assert (status, policy) == (200, f"{NAME}/v1")
                assert orjson.loads(answer)["NodeNames"] == NODES  # the active version's
                # one at a time: the worker is idle when the next answer is written
                deadline = time.monotonic() + 60
                while _shadow_counts(port).get("moved", 0) < i + 1:
                    assert time.monotonic() < deadline, _shadow_counts(port)
                    time.sleep(0.1)
            counts = _shadow_counts(port)
            assert (counts["moved"], counts.get("skipped", 0)) == (4, 0), counts


def test_with_a_forward_the_listener_judges_nothing_itself_and_counts_a_refusal(
    extender_redis,
):
    active_entries_write([_with_shadow(example(NAME))])
    state = runtime_by_hand()
    state.registry.refresh_from_redis()
    state.extender.shadows.tallies.take()
    forwarded: list[bytes] = []
    accept = iter([True, False])
    try:
        entry.shadow_forward = lambda body: next(accept) and not forwarded.append(body)
        for name in ("w1", "w2"):
            body = args_body(go_pod(name), NODES)
            assert entry.extender_answer_or_wait("filter", body, inline=True)[0] == 200
            entry.after_answer()
    finally:
        entry.shadow_forward = None
    assert forwarded == [args_body(go_pod("w1"), NODES)]  # the body as answered
    # w1 is the worker's to judge; no worker was idle for w2: skipped, counted
    assert [t["counts"] for t in state.extender.shadows.tallies.take()] == [{"skipped": 1}]


def test_a_worker_judges_a_forwarded_body_as_the_listener_would_have(extender_redis):
    active_entries_write([_with_shadow(example(NAME))])
    state = runtime_by_hand()
    state.registry.refresh_from_redis()
    state.decisions.take()
    state.extender.shadows.tallies.take()
    body = args_body(go_pod("w1"), NODES)
    assert entry.extender_answer_or_wait("filter", body, inline=True)[0] == 200
    entry.after_answer()  # judged here
    here = [r for r in state.decisions.take() if r.get("role") == "shadow"]
    assert entry.shadow_answer(body) == (200, b"", f"{NAME}/v2")  # as a worker judges it
    there = [r for r in state.decisions.take() if r.get("role") == "shadow"]
    assert [r["shadow"]["difference"] for r in there] == [r["shadow"]["difference"] for r in here]
    assert [r["outcome"] for r in here] == ["moved"]  # cp-1 was the preferred node
    assert [t["counts"] for t in state.extender.shadows.tallies.take()] == [{"moved": 2}]
    # a body that is not a filter's, or of no shadowed policy: nothing judged, no error
    assert entry.shadow_answer(b"{")[0] == 400
    assert entry.shadow_answer(args_body(go_pod("w2", scheduler="other"), NODES))[:2] == (200, b"")
    assert state.extender.shadows.tallies.take() == []


def test_forwarded_work_is_queued_within_its_bounds_and_waits_for_an_idle_worker(monkeypatch):
    monkeypatch.setattr(offload, "FORWARD_QUEUE_BYTES", 10)

    async def scenario() -> tuple[list[bool], list[bool], int]:
        pool = offload.Offload(workers=1, queue=0, forwards=2)
        not_started = [pool.forward(offload.SHADOW, b"x")]  # no pool yet: refused
        pool._idle = asyncio.Queue()  # started, every worker busy: the queue holds the bodies
        results = [pool.forward(offload.SHADOW, body) for body in (b"12345", b"1234", b"1")]
        results.append(pool.forward(offload.SHADOW, b"1"))  # 2 bodies queued: refused
        waiting = len(pool._forwards)
        pool._drain.cancel()
        return not_started, results, waiting

    not_started, results, waiting = asyncio.run(scenario())
    assert not_started == [False]
    # 5 + 4 bytes fit in 10; 1 more byte too, but not a third body; nor past 10 bytes
    assert results == [True, True, False, False] and waiting == 2
