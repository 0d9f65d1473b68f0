"""The shadow version judged in the offload pool's shadow lane, off the listener's event loop
(issue 25): the listener answers from the active version and queues the filter body for the
lane, a process in the idle scheduling class, which judges the shadow on it (policies/extender/
entry.py: shadow_forward); large bodies are answered by the pool's other workers meanwhile.

The listener runs as shipped (as tests/extender/test_offload.py runs it); the counts the
worker makes reach the listener's /metrics through the per-process files."""

from __future__ import annotations

import asyncio
import hashlib
import http.client
import os
import signal
import socket
import threading
import time

import orjson
import pytest

from policies.extender import entry, offload
from policies.extender.shadow import LanePace
from policies.publishing import active_entries_write
from tests.prometheus_text import samples
from tests.redisdb import redis_database

from .conftest import active_entry, args_body, example, go_pod, runtime_by_hand
from .test_offload import (
    REDIS_DB,
    _forked_for,
    _holding_the_pool,
    _lane_processes,
    _listener_pid,
    _listener_process,
    _padded_filter,
    _post,
)

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
            lane = _lane(port)
            assert _answering_priority(port) == offload.WORKER_NICE
            os.kill(lane, signal.SIGSTOP)
            try:
                for i in range(4, 6):  # queued for the lane, which cannot take them now
                    status, _answer, policy = _post(
                        port, "filter", args_body(go_pod(f"w{i}"), NODES)
                    )
                    assert (status, policy) == (200, f"{NAME}/v1")
                # a large body does not wait for the lane: the answering worker takes it
                status, _answer, policy = _post(port, "filter", _padded_filter(go_pod("big")))
                assert (status, policy) == (200, f"{NAME}/v1")
                assert _shadow_counts(port)["moved"] == 4  # the stopped lane judged none yet
            finally:
                os.kill(lane, signal.SIGCONT)
            deadline = time.monotonic() + 60
            while _shadow_counts(port).get("moved", 0) < 6:
                assert time.monotonic() < deadline, _shadow_counts(port)
                time.sleep(0.1)


def _lane(port: int) -> int:
    """The pid of the listener's shadow lane (the idle scheduling class)."""
    (lane,) = _lane_processes(_listener_pid(port))
    assert os.sched_getscheduler(lane) == os.SCHED_IDLE
    return lane


def _answering_priority(port: int) -> int:
    """The nice value of the child forked for a large body (the normal class, at a lower
    priority than the listener's), read while its body is withheld."""
    holder = _holding_the_pool(port, len(_padded_filter(go_pod("big"))))
    try:
        (child,) = _forked_for(port)
        assert os.sched_getscheduler(child) == os.SCHED_OTHER
        deadline = time.monotonic() + 30
        while (nice := os.getpriority(os.PRIO_PROCESS, child)) != offload.WORKER_NICE:
            assert time.monotonic() < deadline, nice  # set by the child once forked
            time.sleep(0.02)
        return nice
    finally:
        holder.close()


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
        entry.shadow_forward = lambda body, counter: (
            next(accept) and not forwarded.append((body, counter))
        )
        for name in ("w1", "w2"):
            body = args_body(go_pod(name), NODES)
            assert entry.extender_answer_or_wait("filter", body, inline=True)[0] == 200
            entry.after_answer()
    finally:
        entry.shadow_forward = None
    # the body as answered, and the policy set it was answered under
    assert forwarded == [(args_body(go_pod("w1"), NODES), state.registry.counter)]
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


def test_the_lane_reads_a_newer_policy_set_than_it_holds_before_it_judges(extender_redis):
    active_entries_write([active_entry(example(NAME), 1)])  # no shadow yet
    state = runtime_by_hand()  # its thread stopped: it reads no set by itself
    state.registry.refresh_from_redis()
    state.extender.shadows.tallies.take()
    held = state.registry.counter
    newer = active_entries_write([_with_shadow(example(NAME))])
    assert newer > held
    body = args_body(go_pod("w1"), NODES)
    # answered under the set this process holds (no shadow): nothing to judge, nothing read
    assert entry.shadow_answer(body, held)[:2] == (200, b"")
    assert state.registry.counter == held and state.extender.shadows.tallies.take() == []
    # answered under the newer set: read first, then judged by its shadow
    assert entry.shadow_answer(body, newer) == (200, b"", f"{NAME}/v2")
    assert state.registry.counter == newer
    assert [t["counts"] for t in state.extender.shadows.tallies.take()] == [{"moved": 1}]


def test_forwarded_work_is_queued_within_its_bounds_for_the_shadow_lane(monkeypatch):
    monkeypatch.setattr(offload, "FORWARD_QUEUE_BYTES", 10)

    async def scenario() -> tuple[list[bool], list[bool], int]:
        pool = offload.Offload(workers=1, queue=0, forwards=2)
        not_started = [pool.forward(offload.SHADOW, b"x")]  # no pool yet: refused
        pool._idle = asyncio.Queue()  # started, every worker busy: the queue holds the bodies
        results = [pool.forward(offload.SHADOW, body) for body in (b"12345", b"1234", b"1")]
        results.append(pool.forward(offload.SHADOW, b"1"))  # 2 bodies queued: refused
        waiting = len(pool._forwards)
        pool._hold.cancel()
        return not_started, results, waiting

    not_started, results, waiting = asyncio.run(scenario())
    assert not_started == [False]
    # 5 + 4 bytes fit in 10; 1 more byte too, but not a third body; nor past 10 bytes
    assert results == [True, True, False, False] and waiting == 2


def test_the_lane_takes_the_priority_it_is_set_to_and_refuses_another():
    from tests.web.test_extender_listener import _settings_error

    assert _settings_error(SCHEDWEB_SHADOW_LANE_CLASS="nice") == ""
    assert "SCHEDWEB_SHADOW_LANE_CLASS idle or nice" in _settings_error(
        SCHEDWEB_SHADOW_LANE_CLASS="realtime"
    )
    # in a thread of its own (the class is a thread's; the threads it starts inherit it)
    got: list[tuple[str, int, int]] = []

    def lane(lane_class: str) -> None:
        name = offload.lane_priority(lane_class)
        got.append((name, os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0)))

    for lane_class in ("idle", "nice"):
        thread = threading.Thread(target=lane, args=(lane_class,))
        thread.start()
        thread.join()
    (idle_name, idle_policy, _), (nice_name, nice_policy, nice_value) = got
    assert (idle_name, idle_policy) == ("idle", os.SCHED_IDLE)
    assert (nice_name, nice_policy, nice_value) == ("nice 19", os.SCHED_OTHER, offload.LANE_NICE)


class _Lane:
    """The lane's end of its channel, for the batching's unit tests: reads each forwarded body
    (the worker's framing) and answers it, counting what it read."""

    def __init__(self) -> None:
        self.ours, self.theirs = socket.socketpair()
        self.bodies: list[tuple[str, bytes]] = []
        self._streams = None
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        stream = self.theirs.makefile("rb")
        while verb := stream.readline().strip().decode():
            chunks = []
            while (length := offload._LENGTH.unpack(stream.read(4))[0]) != offload._END:
                chunks.append(stream.read(length))
            self.bodies.append((verb, b"".join(chunks)))
            self.theirs.sendall(offload._ANSWER.pack(200, 0, 0))

    async def streams(self):
        if self._streams is None:  # one pair of streams per channel, as _Worker's
            self._streams = await asyncio.open_connection(sock=self.ours)
        return self._streams

    def close(self, *, wait: bool) -> None:
        self.ours.close()


def test_forwarded_bodies_wait_for_the_moment_between_two_pods_and_go_in_one_batch():
    async def scenario() -> dict:
        pool = offload.Offload(workers=1, queue=0, forwards=3)
        pool._idle = asyncio.Queue()  # started (no answering worker needed here)
        lane = pool._lane = _Lane()
        seen = {}
        # after filter's answer: queued only, the prioritize that follows is not delayed
        assert pool.forward(f"{offload.SHADOW} 7", b"body-1")
        assert pool.forward(f"{offload.SHADOW} 7", b"body-2")
        await asyncio.sleep(0)  # a loop turn (the timer's is far later)
        seen["held"] = (pool._drain, len(pool._forwards), lane.bodies[:])
        pool.forwards_send()  # after the prioritize's answer: one batch
        seen["batch"] = (len(pool._forwards), pool._in_lane, pool._hold)
        # the batch counts in the bounds while the lane holds it: room for one more body
        seen["bounded"] = [
            pool.forward(offload.SHADOW, b"body-3"),
            pool.forward(offload.SHADOW, b"x"),
        ]
        pool.forwards_send()  # the lane still answers the batch: this one waits its turn
        seen["waits"] = len(pool._forwards)
        await pool._drain
        seen["sent"] = (pool._in_lane, pool._forward_bytes, lane.bodies[:])
        # nothing calls forwards_send again: the hold's timer sends what waits
        while pool._in_lane or pool._forwards or len(lane.bodies) < 3:
            await asyncio.sleep(0.01)
        await pool._drain
        seen["timer"] = (lane.bodies[2:], pool._forward_bytes)
        pool.close()
        return seen

    seen = asyncio.run(scenario())
    assert seen["held"] == (None, 2, [])
    assert seen["batch"] == (0, 2, None)
    assert seen["bounded"] == [True, False] and seen["waits"] == 1
    assert seen["sent"] == (0, len(b"body-3"), [("shadow 7", b"body-1"), ("shadow 7", b"body-2")])
    assert seen["timer"] == ([("shadow", b"body-3")], 0)


def test_a_lane_that_breaks_mid_batch_is_replaced_and_the_bounds_are_given_back():
    async def scenario() -> tuple:
        pool = offload.Offload(workers=1, queue=0, forwards=4)
        pool._idle = asyncio.Queue()
        lane = pool._lane = _Lane()
        lane.theirs.shutdown(socket.SHUT_RDWR)  # the lane died
        assert pool.forward(offload.SHADOW, b"body-1")
        pool.forwards_send()
        await pool._drain
        result = (pool._lane, pool._in_lane, pool._forward_bytes)
        pool._hold = None
        return result

    assert asyncio.run(scenario()) == (None, 0, 0)


def test_the_lane_brings_its_snapshot_up_to_date_at_most_every_refresh_interval(
    extender_redis, monkeypatch
):
    active_entries_write([_with_shadow(example(NAME))])
    state = runtime_by_hand()
    state.registry.refresh_from_redis()
    refreshes: list[float] = []
    refresh = state.snapshot_refresh
    now = [1000.0]
    monkeypatch.setattr(state, "snapshot_refresh", lambda: (refreshes.append(now[0]), refresh()))
    monkeypatch.setattr(offload, "_lane_clock", lambda: now[0])
    monkeypatch.setattr(offload, "_lane_refreshed", float("-inf"))
    paced: list[float] = []
    monkeypatch.setattr(offload, "_lane_pace", _Pace(paced))
    body = args_body(go_pod("w1"), NODES)
    counter = f"{offload.SHADOW} {state.registry.counter}"
    for step in (0.0, 0.1, 0.1, 0.1, 0.2):  # at 1000, 1000.1, .2, .3 and .5
        now[0] += step
        assert offload._answer(counter, body) == (200, b"", f"{NAME}/v2")
    assert refreshes == [1000.0, pytest.approx(1000.3)]
    assert len(paced) == 5  # the lane's pace after every shadow body
    # a large body (the answering workers) is always answered over the newest snapshot, unpaced
    offload._answer("filter", body)
    offload._answer("filter", body)
    assert len(refreshes) == 4
    assert len(paced) == 5


class _Pace:
    """A LanePace that records its calls and never sleeps."""

    def __init__(self, calls: list[float]) -> None:
        self.calls = calls

    def wait(self) -> float:
        self.calls.append(time.monotonic())
        return 0.0


def test_the_lane_sleeps_off_the_cpu_it_spent_past_its_share():
    """The lane's whole CPU (its process's) held to `share` of a core, with a clock, a CPU
    clock and a sleep of the test's: within the share nothing waits; past it the lane sleeps
    exactly what brings it back to the share; an idle lane saves at most `burst`."""
    now, cpu, slept = [100.0], [5.0], []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    pace = LanePace(share=0.25, burst=0.1, cpu=lambda: cpu[0], clock=lambda: now[0], sleep=sleep)
    now[0] += 1.0
    cpu[0] += 0.2  # 0.25 earned in the second (the burst caps it at 0.1), 0.2 spent
    assert pace.wait() == pytest.approx(0.4)  # 0.1 short: 0.4 s at 0.25
    assert slept == [pytest.approx(0.4)]
    assert pace.wait() == 0.0  # the sleep earned back exactly what was missing
    now[0] += 0.2
    cpu[0] += 0.05  # 0.05 earned, 0.05 spent: even
    assert pace.wait() == 0.0
    now[0] += 3600.0  # idle for an hour: at most the burst saved
    cpu[0] += 0.3
    assert pace.wait() == pytest.approx(0.8)  # 0.1 saved, 0.3 spent: 0.2 short
    # a share of 0 judges nothing (the governor sheds every pod): the lane never sleeps forever
    idle = LanePace(share=0.0, cpu=lambda: cpu[0], clock=lambda: now[0], sleep=sleep)
    cpu[0] += 1.0
    assert idle.wait() == 0.0
    assert len(slept) == 2
