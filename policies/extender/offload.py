"""Large extender bodies are answered in processes forked from the listener, off its event loop.

A filter, prioritize or preempt body that is large (over SCHEDWEB_EXTENDER_INLINE_BODY_BYTES) or
that is much work (more items than SCHEDWEB_EXTENDER_INLINE_NODES or _INLINE_NAMES, issue 27) is
answered by a child the listener forks for it, through the same entry.extender_answer. The
listener's process only moves bytes and sends the answer, so a 7 MB body of 200000 bare Node
objects (seconds of parsing and checking, with the GIL held by orjson for 120-450 ms at a time)
no longer holds up a normal 500-name filter or /healthz.

The child shares the listener's snapshot and compiled policies page by page (issue 28): until
then each process of a spawned pool held its own copy, a second snapshot in every extender pod
(215 MB beside the listener's 283 at 5000 nodes and 50 000 pods). It is forked for one body and
ends with its answer, so the sharing never decays: CPython copies a page whenever it changes a
reference count on it, and a long-lived fork would copy, body after body and watch event after
watch event, what it shares. One answer copies what it touches (about 55 MB at 50 000 and at
150 000 pods for bodies of 8000 names, `make bench`'s sizing suite:
docs/perf/issue-28-sizing.txt); the listener's changes meanwhile copy the pages they write, for
the child's few milliseconds.
The fork is taken with the serve lock held (the thread that applies the cluster's changes holds
it while it changes the snapshot), so the child's snapshot is whole; only the forking thread
goes on in the child, so every lock of its runtime is replaced (another thread may have held
one: policies/extender/fork.py) and it never returns to the loop. Before its answer it reads what
Redis holds now, one round trip each when nothing changed: the active policies (a publish the
listener has not applied yet) and the snapshot's changes since the fork. What answering adds to
the runtime's records (metrics, sampled decisions, rejected pods, canary counts) goes back with
the answer and is added to the listener's (fork.effects). The fork itself holds the
listener's GIL while its page tables are copied, and a normal call that comes meanwhile waits:
5-6 ms at 50 000 pods on a quiet machine here, 16-22 ms at 150 000 beside a loaded test run
(kube-scheduler sends large bodies only without nodeCacheCapable, and then every body is large).

The body is streamed: the listener forks the child when the request's headers say the body is
large (or, chunked, once it grows past the inline limit) and forwards each piece to it as it
arrives, over a Unix socket pair, so the listener never holds a large body whole (six 60 MB
bodies took it from 179 MB to 790 MB, and 562 MB stayed). Reading from the client waits while
the child's socket is full (asyncio's flow control), so a fast client cannot make the listener
buffer either. The child assembles the body and answers.

    listener -> child: b"<verb>\\n", then frames of a 4-byte length and that many bytes, then a
                       0 length (the end) or 0xFFFFFFFF (abandoned: the client left, or the body
                       grew past the limit; the child drops what it has and ends)
    child -> listener: a 10-byte header (status, policy length, body length), policy, body, then
                       a 4-byte length and the effects (the shadow lane: no effects)

A child gets SIGKILL when the listener ends (PR_SET_PDEATHSIG), and the listener kills one that
has not ended once its request is over (answered, abandoned, or cancelled) and reaps it from
its loop.

The pool also takes work no caller waits for (`forward`): the filter bodies the listener
answered from the active version, for the shadow version to be judged on them (issue 25; entry.
shadow_forward), queued (bounded) and sent in batches between two pods (after a prioritize's
answer: forwards_send) to a process of their own, the shadow lane, started with the first of
them. It runs in Linux's idle scheduling class (SCHED_IDLE; nice
19 where that is refused, or by the setting SCHEDWEB_SHADOW_LANE_CLASS): it gets a core only
when nothing else wants it, so on a busy machine kube-scheduler, the API server and the listener
are never kept waiting for it (within a container's CPU limit: the pod's own processes, not the
node's, are what it yields to). At nice 10 in the answering worker it still cost kube-scheduler
17% of its throughput on this 2-core machine (bench shadow: 0.83), more than judging on the
listener's loop had. The lane serves kube-scheduler nothing, so publishers do not wait for it; a
body names the policy set's counter the listener answered with, and the lane reads a newer set
before it judges. Large bodies never wait for it. Its whole CPU time is paced to
SCHEDWEB_SHADOW_SHARE of a core (shadow.LanePace): past it the lane sleeps, and the bodies wait
in the listener's bounded queue.

A thread would not do: orjson.loads does not release the GIL. The children run at a lower CPU
priority (nice 10) so that on a busy machine the listener's own process is scheduled first.

The pool is bounded: OFFLOAD_WORKERS bodies answered at once (a child each) and at most
OFFLOAD_QUEUE waiting for a place (their bodies left unread meanwhile); past that a body gets a
503 at once (kube-scheduler retries the pod with backoff), at its headers when Content-Length
says it is large. A child that dies fails its request with a 503. The shadow lane is a process
of its own, started with `spawn` (a long-lived fork of the listener would carry its loop and the
runtime's threads in a broken state, and copy the shared pages as it goes); it holds a snapshot
of its own, lean like the listener's, and lets go of it when idle for
SCHEDWEB_EXTENDER_OFFLOAD_IDLE_SECONDS (runtime.py, _memory_release).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from . import fork, protocol

log = logging.getLogger(__name__)

BUSY = 503
# Forwarded bodies (the shadow's) waiting for a worker: at most `forwards` of them (the
# setting SCHEDWEB_SHADOW_QUEUE) and FORWARD_QUEUE_BYTES; past either they are refused and
# counted by the caller (the shadow's `skipped`). 256 filter bodies of 500 names are about 3 MB.
FORWARD_QUEUE_BYTES = 16 * 1024 * 1024
SHADOW = "shadow"  # a filter body the listener answered, for the shadow version (forward)
# The longest a forwarded body waits for the moment between two pods (forwards_send) before it
# is sent anyway: a filter answered with no prioritize after it (no node fit, or no prioritize
# configured) is not held for the next pod.
FORWARD_HOLD_SECONDS = 0.05
# The lane brings its snapshot up to date at most this often (not per body, as the answering
# workers do): each refresh is a Redis round trip, and on a busy scheduler one per pod cost
# kube-scheduler throughput the idle class does not give back (the Redis server and the
# loopback are not the lane's). Both versions are compared on the same state either way.
LANE_REFRESH_SECONDS = 0.25
WORKER_NICE = 10
LANE_CLASSES = ("idle", "nice")  # the shadow lane's priority (lane_priority)
LANE_NICE = 19  # the shadow lane's priority as "nice", and where the idle class is refused
PARENT_CHECK_SECONDS = 1.0
_LENGTH = struct.Struct("!I")
_END = 0
_ABANDONED = 0xFFFFFFFF
_ANSWER = struct.Struct("!HII")  # status, policy length, body length
_VERB_MAX = 40  # "<verb>" or "shadow <policy set counter>"


class Abandoned(Exception):
    """The body will not be complete (the client left, or it grew past the limit); raised by
    the body's iterator, passed on to the caller once the worker has been told."""


# --- the worker processes ------------------------------------------------------------------


def _worker_start(parent: int, *, lane: str) -> None:
    """Runs once in the shadow lane's process: its priority (`lane`, its class: LANE_CLASSES),
    set before any thread starts (threads inherit it), an exit with its parent, Django set up,
    runtime loaded."""
    lane_priority(lane)
    threading.Thread(target=_exit_with, args=(parent,), name="offload-parent", daemon=True).start()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "schedweb.settings")
    import django

    django.setup()
    from multiprocessing.util import Finalize

    from .runtime import reset_runtime, runtime, snapshot_on_demand

    snapshot_on_demand()  # brought up to date every LANE_REFRESH_SECONDS, not on every change
    runtime()  # the initial load here, not in the first body
    # The pool's shutdown ends this process through multiprocessing's exit, which runs these
    # finalizers (not atexit).
    Finalize(None, reset_runtime, exitpriority=10)


def lane_priority(lane_class: str) -> str:
    """This thread (and the threads it starts) at the shadow lane's priority: "idle", the idle
    scheduling class, run only when no other task wants the core (sched(7); an unprivileged
    process may always move down to it); "nice", nice 19 (and where the idle class is missing
    or refused), which still gets a small share of a core that other tasks keep busy. Returns
    which one it got."""
    if lane_class == "idle":
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            return "idle"
        except (AttributeError, OSError):
            pass
    with contextlib.suppress(OSError):
        os.nice(LANE_NICE - os.nice(0))
    return f"nice {os.nice(0)}"


def _exit_with(parent: int) -> None:
    """Ends this worker once `parent` (the listener's process) is gone. uvicorn's worker
    processes end with os._exit, past any clean-up, and a listener can be killed: without this,
    workers were left behind holding a runtime each (seen after a SIGTERM)."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_SECONDS)
    os._exit(0)


def _answer(verb: str, body: bytes) -> tuple[int, bytes, str]:
    """In a worker process: the verb's answer, exactly as the listener would give it, over the
    snapshot as it is now in Redis (this process does not follow it between requests)."""
    from .entry import extender_answer, shadow_answer
    from .runtime import runtime

    verb, _, counter = verb.partition(" ")
    if verb == SHADOW:
        global _lane_refreshed
        now = _lane_clock()
        if now - _lane_refreshed >= LANE_REFRESH_SECONDS:
            runtime().snapshot_refresh()
            _lane_refreshed = now
        answer = shadow_answer(body, int(counter) if counter.isdigit() else None)
        lane_pace().wait()
        return answer
    runtime().snapshot_refresh()
    return extender_answer(verb, body)


_lane_clock = time.monotonic  # the lane's refresh clock (LANE_REFRESH_SECONDS); tests set theirs
_lane_refreshed = float("-inf")
_lane_pace = None


def lane_pace():
    """The shadow lane's pace (shadow.LanePace): SCHEDWEB_SHADOW_SHARE of a core, at most."""
    global _lane_pace
    if _lane_pace is None:
        from django.conf import settings

        from .shadow import LanePace

        _lane_pace = LanePace(share=settings.SCHEDWEB_SHADOW_SHARE)
    return _lane_pace


def _request_read(stream: Any) -> tuple[str, bytes] | bool | None:
    """The next request on a worker's channel: (verb, body); None when the listener closed it
    or went away; False for a body the listener abandoned."""
    verb = stream.readline(_VERB_MAX).strip().decode("ascii", "replace")
    if not verb:
        return None  # the listener closed the channel
    chunks: list[bytes] | None = []
    while True:
        header = stream.read(_LENGTH.size)
        if len(header) != _LENGTH.size:
            return None  # the listener went away mid-body
        (length,) = _LENGTH.unpack(header)
        if length == _END:
            break
        if length == _ABANDONED:
            return False
        chunk = stream.read(length)
        if len(chunk) != length:
            return None  # the listener went away mid-body
        chunks.append(chunk)
    return verb, b"".join(chunks)


def _answered(verb: str, body: bytes) -> bytes:
    """The answer's frame for the channel: header, policy label, body."""
    try:
        status, answer, policy = _answer(verb, body)
    except Exception:  # the services never raise; if one does, the caller retries
        log.exception("extender offload: %s failed in the worker", verb)
        status, answer, policy = BUSY, protocol.error_body("the large-body worker failed"), ""
    label = policy.encode()
    return _ANSWER.pack(status, len(label), len(answer)) + label + answer


def _worker_main(channel: socket.socket, parent: int, lane: str) -> None:
    """The shadow lane's process (`lane`: its priority class): answers the bodies the listener
    streams over `channel`, one at a time, until the listener closes it (or exits)."""
    _worker_start(parent, lane=lane)
    stream = channel.makefile("rb")
    while True:
        request = _request_read(stream)
        if request is None:
            return
        if request is False:
            continue
        verb, body = request
        channel.sendall(_answered(verb, body))
        del body


def _child_main(channel: socket.socket, state: Any) -> None:
    """In a child forked for one body (fork.Child): reads it, answers it over the listener's
    snapshot and policies as they were at the fork, brought up to date (the policies here, the
    snapshot in _answer), and sends back the answer and what answering added to the runtime's
    records (fork.effects)."""
    request = _request_read(channel.makefile("rb"))
    if not request:
        return
    verb, body = request
    state.policies_refresh()
    answer = _answered(verb, body)
    del body
    effects = fork.effects(state)
    channel.sendall(answer + _LENGTH.pack(len(effects)) + effects)


# --- the listener's side -------------------------------------------------------------------


class _Worker:
    """A worker process and the listener's end of its channel."""

    def __init__(self, context: Any, parent: int, *, lane: str) -> None:
        ours, theirs = socket.socketpair()
        self.lane = lane
        self.process = context.Process(
            target=_worker_main,
            args=(theirs, parent, lane),
            name="schedweb-shadow",
            daemon=True,
        )
        self.process.start()
        theirs.close()  # the child has its own copy
        self.socket = ours
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def streams(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """The channel's streams in the running loop. A listener has one loop; tests that run
        each request in a loop of its own get streams over a copy of the socket per loop (a
        transport owns its socket and closes it when it goes)."""
        loop = asyncio.get_running_loop()
        if self._streams is None or self._loop is not loop:
            copy = socket.socket(fileno=os.dup(self.socket.fileno()))
            self._streams = await asyncio.open_connection(sock=copy)
            self._loop = loop
        return self._streams

    def close(self, *, wait: bool) -> None:
        if self._streams is not None:
            with contextlib.suppress(RuntimeError):  # its loop is closed: the socket below ends it
                self._streams[1].close()
        self.socket.close()
        if wait:
            self.process.join(10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)


class Offload:
    """The pool and its bound; one per listener process, created on first use, started at the
    listener's lifespan start (in its event loop)."""

    def __init__(
        self, *, workers: int, queue: int, forwards: int = 256, lane_class: str = "idle"
    ) -> None:
        self.workers = workers
        self.forwards = forwards
        self.lane_class = lane_class
        self.capacity = workers + queue
        self.in_flight = 0  # bodies reserved a place: being answered, or waiting for a worker
        self._context = multiprocessing.get_context("spawn")  # the shadow lane's
        # a token per body that may be answered at once (a forked child each)
        self._idle: asyncio.Queue[int] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._children: set[fork.Child] = set()
        # Work no caller waits for (forward): queued, then sent in batches by the task `_drain`
        # to the shadow lane's process, started with the first of it. The bounds count the
        # batch the lane holds (`_in_lane` bodies) with the queue (`_forward_bytes`: both).
        self._lane: _Worker | None = None
        self._forwards: deque[tuple[str, bytes]] = deque()
        self._forward_bytes = 0
        self._in_lane = 0
        self._drain: asyncio.Task | None = None
        self._hold: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Binds the pool to the running loop (the listener's lifespan start; tests run each
        request in a loop of their own)."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        self._loop = loop
        self._idle = asyncio.Queue()
        for token in range(self.workers):
            self._idle.put_nowait(token)

    def full(self) -> bool:
        return self.in_flight >= self.capacity

    @contextlib.asynccontextmanager
    async def place(self):
        """A place in the pool for one body (raises Full when there is none): held for as long
        as the body is sent and answered, or waits for a worker."""
        if self.full():
            raise Full
        self.in_flight += 1
        try:
            yield self
        finally:
            self.in_flight -= 1

    async def answer(self, verb: str, body: bytes | AsyncIterator[bytes]) -> tuple[int, bytes, str]:
        """The answer from a worker to `body` (bytes, or pieces as they arrive), within a
        place(). Abandoned from the pieces passes through once the worker knows; a worker that
        dies or fails to answer gets a 503 (and a replacement)."""
        from .runtime import runtime

        self.start()
        assert self._idle is not None
        token = await self._idle.get()
        try:
            try:
                state = await asyncio.to_thread(runtime)  # built already, but for a failed start
                child = fork.Child(state, _child_main, nice=WORKER_NICE)
            except Exception:  # no runtime, or no fork (out of memory or processes): a retry
                log.exception("extender offload: no child for a large body")
                return BUSY, protocol.error_body("no large-body worker; retry", code="busy"), ""
            self._children.add(child)
            try:
                return await self._exchange(child, verb, body, state)
            finally:
                self._children.discard(child)
                child.close()
        finally:
            self._idle.put_nowait(token)

    def forward(self, verb: str, body: bytes) -> bool:
        """Queues `body` for the shadow lane, for work no caller waits for (the shadow's, after
        an answer was written: "shadow <counter>"); its answer is read and dropped. False
        (nothing queued) before the pool starts, or past `forwards` bodies or
        FORWARD_QUEUE_BYTES (the lane's batch counted). Sent by forwards_send, at the latest
        FORWARD_HOLD_SECONDS later. In the lane's process: no large body waits for it. On the
        listener's loop."""
        if self._idle is None:
            return False
        if len(self._forwards) + self._in_lane >= self.forwards or (
            self._forward_bytes + len(body) > FORWARD_QUEUE_BYTES
        ):
            return False
        self._forwards.append((verb, body))
        self._forward_bytes += len(body)
        if self._hold is None:
            self._hold = asyncio.get_running_loop().call_later(
                FORWARD_HOLD_SECONDS, self.forwards_send
            )
        return True

    def forwards_send(self) -> None:
        """The queued bodies to the lane now, in one batch. Called between two pods
        (entry.after_answer, once an answer that left no shadow work is written: a
        prioritize's), not right after a filter's answer: kube-scheduler's prioritize for the
        same pod follows at once, and the listener's share of the sending (the writes, the
        answers read back) delayed it (bench shadow: a lane that judged nothing still cost 7%
        of kube-scheduler's throughput). While the lane answers a batch, the next waits."""
        if self._hold is not None:
            self._hold.cancel()
            self._hold = None
        if not self._forwards or self._idle is None:
            return
        if self._drain is not None and not self._drain.done():
            self._hold = asyncio.get_running_loop().call_later(
                FORWARD_HOLD_SECONDS, self.forwards_send
            )
            return
        batch = list(self._forwards)
        self._forwards.clear()
        self._in_lane = len(batch)
        self._drain = asyncio.get_running_loop().create_task(self._lane_send(batch))

    async def _lane_send(self, batch: list[tuple[str, bytes]]) -> None:
        """`batch` to the lane, written at once, and its answers read back (and dropped); the
        lane replaced, for the next batch, when it broke."""
        if self._lane is None:
            self._lane = _Worker(self._context, os.getpid(), lane=self.lane_class)
        lane, done = self._lane, False
        try:
            reader, writer = await lane.streams()
            for verb, body in batch:
                writer.write(verb.encode("ascii") + b"\n")
                if body:
                    writer.write(_LENGTH.pack(len(body)))
                    writer.write(body)
                writer.write(_LENGTH.pack(_END))
            await writer.drain()
            for _ in batch:
                _status, policy_length, length = _ANSWER.unpack(
                    await reader.readexactly(_ANSWER.size)
                )
                await reader.readexactly(policy_length + length)
            done = True
        except (OSError, RuntimeError, asyncio.IncompleteReadError, struct.error):
            log.error("extender offload: the shadow lane died or broke its channel; replacing it")
        finally:
            self._in_lane = 0
            self._forward_bytes -= sum(len(body) for _, body in batch)
            if not done and lane is self._lane:
                self._lane = None
                lane.close(wait=False)

    async def _exchange(
        self, child: fork.Child, verb: str, body: bytes | AsyncIterator[bytes], state: Any
    ) -> tuple[int, bytes, str]:
        """`body` to `child` and its answer back; what answering added to the child's records
        (metrics, sampled decisions) merged into this process's."""
        try:
            reader, writer = await child.streams()
            writer.write(verb.encode("ascii") + b"\n")
            try:
                if isinstance(body, bytes | bytearray | memoryview):
                    if body:
                        writer.write(_LENGTH.pack(len(body)))
                        writer.write(body)
                else:
                    async for piece in body:
                        if piece:
                            writer.write(_LENGTH.pack(len(piece)))
                            writer.write(piece)
                            await writer.drain()  # the client waits while the child is full
            except Abandoned:
                with contextlib.suppress(OSError, RuntimeError):
                    writer.write(_LENGTH.pack(_ABANDONED))
                    await writer.drain()
                raise
            writer.write(_LENGTH.pack(_END))
            await writer.drain()
            status, policy_length, length = _ANSWER.unpack(await reader.readexactly(_ANSWER.size))
            policy = (await reader.readexactly(policy_length)).decode()
            answer = await reader.readexactly(length)
            (effects_length,) = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))
            effects = await reader.readexactly(effects_length)
        except (OSError, RuntimeError, asyncio.IncompleteReadError, struct.error):
            # A child died (killed, out of memory): this request fails, the next gets a child
            # of its own. uvloop raises RuntimeError ("the handler is closed") on a write once
            # the channel's transport has seen the dead child's EOF and closed, where asyncio's
            # own loop drops the write and fails the drain: which one depends on whether the
            # loop ran between the death and the write (on a loaded machine, 3 of 8 runs got a
            # 500 before both were caught).
            log.error("extender offload: a forked child died or broke its channel")
            return BUSY, protocol.error_body("the large-body worker failed; retry", code="busy"), ""
        try:
            fork.effects_merge(state, effects)
        except Exception:  # its counts are lost, never its answer
            log.exception("extender offload: a child's records could not be merged")
        return status, answer, policy

    def close(self, *, wait: bool = False) -> None:
        """Stops the pool (the listener's shutdown): the children answering are killed, the
        shadow lane sees its channel close and exits; with `wait`, it is joined."""
        for child in list(self._children):
            child.close()
        self._children.clear()
        if self._lane is not None:
            self._lane.close(wait=wait)
        self._lane = None
        if self._hold is not None:
            self._hold.cancel()
            self._hold = None
        if self._drain is not None:
            self._drain.cancel()  # its own clean-up takes its batch off the bounds
        self._forward_bytes -= sum(len(body) for _, body in self._forwards)
        self._forwards.clear()
        self._idle = None
        self._loop = None


class Full(Exception):
    """The pool has no place for another body."""


def busy_answer() -> tuple[int, bytes, str]:
    """503: the pool already holds as many large bodies as it may."""
    message = "busy: too many large requests are in progress; retry"
    return BUSY, protocol.error_body(message, code="busy"), ""
