"""Large extender bodies are answered in a pool of worker processes, off the listener's event loop.

A body over SCHEDWEB_EXTENDER_INLINE_BODY_BYTES (filter, prioritize, preempt) is handed, as bytes,
to a process of this pool, which answers it with its own runtime (policies/extender/runtime.py:
the same active versions and snapshot from Redis, its metrics and decisions flushed the same way)
through the same entry.extender_answer. The listener's process only reads the body and sends the
answer, so a 7 MB body of 200000 bare Node objects (seconds of parsing and checking, with the GIL
held by orjson for 120-450 ms at a time) no longer holds up a normal 500-name filter or /healthz.

A worker brings its snapshot up to date when a body arrives rather than following every cluster
change (policies/extender/runtime.py, snapshot_on_demand): one Redis round trip when nothing
changed, the deltas since its last body otherwise (or a full load past the catch-up limit).

A thread would not do: orjson.loads does not release the GIL. The workers run at a lower CPU
priority (nice 10) so that on a busy machine the listener's own process is scheduled first.

The pool is bounded: OFFLOAD_WORKERS processes and at most OFFLOAD_QUEUE bodies waiting; past that
a large body gets a 503 at once (kube-scheduler retries the pod with backoff), before it is read
when Content-Length says it is large. Processes are started with `spawn` (a forked copy of a
uvicorn worker would carry its loop and the runtime's threads in a broken state).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from . import protocol

log = logging.getLogger(__name__)

BUSY = 503
WORKER_NICE = 10
PARENT_CHECK_SECONDS = 1.0


def _worker_start(parent: int) -> None:
    """Runs once in each worker process: lower priority, an exit with its parent, Django set
    up, runtime loaded."""
    import contextlib

    with contextlib.suppress(OSError):
        os.nice(WORKER_NICE)
    threading.Thread(target=_exit_with, args=(parent,), name="offload-parent", daemon=True).start()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "schedweb.settings")
    import django

    django.setup()
    from multiprocessing.util import Finalize

    from .runtime import reset_runtime, runtime, serve_as, snapshot_on_demand

    snapshot_on_demand()  # brought up to date per large body, not on every cluster change
    serve_as("offload")  # it answers with the active policies too: publishers wait for it
    runtime()  # the initial load here, not in the first large request
    # The pool's shutdown ends this process through multiprocessing's exit, which runs these
    # finalizers (not atexit): the process then stops reporting what it serves.
    Finalize(None, reset_runtime, exitpriority=10)


def _exit_with(parent: int) -> None:
    """Ends this worker once `parent` (the listener's process) is gone. uvicorn's worker
    processes end with os._exit, past the executor's own clean-up, and a listener can be killed:
    without this, workers were left behind holding a runtime each (seen after a SIGTERM)."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_SECONDS)
    os._exit(0)


def _answer(verb: str, body: bytes) -> tuple[int, bytes, str]:
    """In a worker process: the verb's answer, exactly as the listener would give it, over the
    snapshot as it is now in Redis (this process does not follow it between requests)."""
    from .entry import extender_answer
    from .runtime import runtime

    runtime().snapshot_refresh()
    return extender_answer(verb, body)


def _ping() -> int:
    return os.getpid()


class Offload:
    """The pool and its bound; one per listener process, created on first use."""

    def __init__(self, *, workers: int, queue: int) -> None:
        self.workers = workers
        self.capacity = workers + queue
        self.in_flight = 0
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_start,
                initargs=(os.getpid(),),
            )
        return self._pool

    def start(self) -> None:
        """Starts the workers now (the listener's lifespan start) rather than on the first
        large body: their start takes a second or two."""
        pool = self._executor()
        for _ in range(self.workers):
            pool.submit(_ping)

    def full(self) -> bool:
        return self.in_flight >= self.capacity

    async def answer(self, verb: str, body: bytes) -> tuple[int, bytes, str]:
        """The answer from a worker process; 503 when the pool is full or its process died."""
        if self.full():
            return busy_answer(self.capacity)
        self.in_flight += 1
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._executor(), _answer, verb, body)
        except BrokenProcessPool:
            # A worker died (killed, out of memory): this request fails, the next gets a new pool.
            log.error("extender offload: a worker process died; starting a new pool")
            self.close()
            return BUSY, protocol.error_body("the large-body worker failed; retry"), ""
        finally:
            self.in_flight -= 1

    def close(self, *, wait: bool = False) -> None:
        """Stops the workers: those waiting are cancelled; with `wait`, the running ones are
        finished and the processes joined (the listener's shutdown)."""
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)
            self._pool = None


def busy_answer(capacity: int) -> tuple[int, bytes, str]:
    """503: `capacity` large bodies are already being answered or waiting."""
    message = f"busy: {capacity} large requests are already in progress; retry"
    return BUSY, protocol.error_body(message, code="busy"), ""
