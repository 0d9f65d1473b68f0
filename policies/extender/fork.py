"""A child process forked from an extender listener for one large body (issue 28).

The child shares the listener's snapshot and compiled policies page by page instead of holding
a copy of its own (policies/extender/offload.py says why a child per body, and what it costs).
This module is the fork's mechanics: `Child` forks with the runtime's serve lock held (the
thread that applies the cluster's changes holds it while it changes the snapshot, so the
snapshot the child inherits is whole); in the child, `_prepared` makes the listener's runtime the
child's (only the forking thread goes on after a fork, so a lock another thread held then would
stay held: every lock of the runtime's objects is replaced) and runs the caller's `main` with the
child's end of a socket pair; `effects` and `effects_merge` carry what answering added to the
runtime's records (metrics, sampled decisions, rejected pods, canary counts) back to the
listener, which records them with its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import os
import pickle
import signal
import socket
import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1  # prctl(2)
# A child not yet gone once its request is over is looked at again this often (reaped).
REAP_SECONDS = 0.05
_LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))
CONTAINER_MAX = 64  # entries of a list, tuple, set or dict that locks_renewed looks into


class Child:
    """A process forked from this one with `state` (the extender runtime) for one body, running
    `main(channel, state)` at CPU priority `nice`, and this side's end of its channel."""

    def __init__(
        self, state: Any, main: Callable[[socket.socket, Any], None], *, nice: int = 0
    ) -> None:
        ours, theirs = socket.socketpair()
        parent = os.getpid()
        with state.serve_lock:
            pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 1
            try:
                ours.close()
                _prepared(state, parent, nice)
                main(theirs, state)
                code = 0
            except BaseException:
                with contextlib.suppress(BaseException):
                    log.exception("extender: the child forked for a body failed")
            finally:
                os._exit(code)
        theirs.close()
        self.pid = pid
        self.socket = ours
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def streams(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._streams is None:
            self._streams = await asyncio.open_connection(sock=self.socket)
        return self._streams

    def close(self) -> None:
        """Its channel closed, the child killed if it has not ended, and reaped (now, or by the
        loop shortly after: an answered child is exiting)."""
        if self._streams is not None:
            with contextlib.suppress(RuntimeError):
                self._streams[1].close()
        self.socket.close()
        if not _reaped(self.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            _reap_later(self.pid)


def _reaped(pid: int) -> bool:
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


def _reap_later(pid: int) -> None:
    """Waits for `pid` from the running loop (no thread blocks on it), or here when there is
    none (a killed child ends at once)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        return

    def again() -> None:
        if not _reaped(pid):
            loop.call_later(REAP_SECONDS, again)

    loop.call_later(REAP_SECONDS, again)


def _prepared(state: Any, parent: int, nice: int) -> None:
    """In the child, first: it dies with the listener, leaves the listener's signals alone,
    collects nothing it inherited, and takes the runtime over (`state`)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # when the forking thread ends
    except (OSError, AttributeError):  # not Linux: it ends after its one body anyway
        pass
    if os.getppid() != parent:  # the listener ended before it could be told
        os._exit(0)
    # The listener's signal handlers (uvicorn's) wake its loop through a descriptor this child
    # shares: a signal sent here must not reach the listener's loop.
    with contextlib.suppress(ValueError):  # forked from a thread other than the main one
        signal.set_wakeup_fd(-1)
        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, signal.SIG_DFL)
    if nice:
        with contextlib.suppress(OSError):
            os.nice(nice)
    # What it inherited is never collected here: a collection writes to every object it walks,
    # which would copy the pages it shares with the listener.
    gc.freeze()
    _runtime_taken(state)


def _runtime_taken(state: Any) -> None:
    """The listener's runtime becomes the child's (runtime() returns it here): fresh locks, no
    thread, no record of what it serves (the listener's, which confirmed it), and nothing
    pending but what its body adds (`effects`)."""
    state.pid = os.getpid()
    state.role = None
    locks_renewed(state)
    metrics = state.metrics
    metrics.directory = None  # its counts go back to the listener, not to a file
    metrics.pid = state.pid
    for counts in (metrics._pending, metrics._unsent, metrics._totals):
        counts.clear()
    state.decisions._items.clear()
    state.rejections.clear()
    state.extender.canary_counts._pending.clear()


def locks_renewed(root: object, depth: int = 8) -> None:
    """Every lock held by `root` and by the schedweb objects it holds (to `depth` levels),
    in an attribute, a slot or a small list, tuple, set or dict value of one, replaced by a new,
    free one; a lock shared by two of them (the serve lock) stays shared. Containers of more
    than CONTAINER_MAX entries (the snapshot's nodes and pods) are not walked: their entries'
    counts would be written, copying the pages the child shares with the listener. Other
    libraries' objects are left alone: redis-py renews its pool's locks when it sees a new
    pid."""
    fresh: dict[int, Any] = {}
    seen: set[int] = set()

    def renewed(value: Any) -> Any:
        if id(value) not in fresh:
            rlock = isinstance(value, _LOCK_TYPES[1])
            fresh[id(value)] = threading.RLock() if rlock else threading.Lock()
        return fresh[id(value)]

    level: list[Any] = [root]
    for _ in range(depth):
        following: list[Any] = []
        for obj in level:
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if isinstance(obj, dict | list):
                items = obj.items() if isinstance(obj, dict) else enumerate(obj)
                for key, value in list(items):
                    if isinstance(value, _LOCK_TYPES):
                        obj[key] = renewed(value)
                    elif _walked(value):
                        following.append(value)
                continue
            if isinstance(obj, tuple | set | frozenset):  # cannot change: walked, not renewed
                following.extend(value for value in obj if _walked(value))
                continue
            for name, value in _fields(obj):
                if isinstance(value, _LOCK_TYPES):
                    with contextlib.suppress(AttributeError, TypeError):  # read-only
                        setattr(obj, name, renewed(value))
                elif _walked(value):
                    following.append(value)
        level = following


def _walked(value: Any) -> bool:
    """A schedweb object, or a small container that may hold one."""
    if isinstance(value, dict | list | tuple | set | frozenset):
        return len(value) <= CONTAINER_MAX
    return type(value).__module__.startswith("policies.")


def _fields(obj: Any) -> list[tuple[str, Any]]:
    """An object's attributes, from its __dict__ and its classes' __slots__."""
    fields = list(getattr(obj, "__dict__", {}).items())
    for klass in type(obj).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(obj, name):
                fields.append((name, getattr(obj, name)))
    return fields


def effects(state: Any) -> bytes:
    """In the child, after its answer: what answering added to the runtime's records, for
    `effects_merge` (pickled: the same program reads them back)."""
    canary = state.extender.canary_counts
    return pickle.dumps(
        {
            "metrics": dict(state.metrics._pending),
            "decisions": state.decisions.take(),  # deferred ones built here, not in the listener
            "rejections": list(state.rejections),
            "canary": ({k: dict(v) for k, v in canary._pending.items()}, canary._guards),
        },
        protocol=pickle.HIGHEST_PROTOCOL,
    )


def effects_merge(state: Any, data: bytes) -> None:
    """A child's `effects` added to this process's records (its runtime's thread flushes them
    with its own)."""
    taken = pickle.loads(data)  # written by this program's child (effects above)
    metrics = state.metrics
    with metrics._lock:
        for key, value in taken["metrics"].items():
            metrics._pending[key] += value
    for decision in taken["decisions"]:
        state.decisions.append(decision)
    state.rejections.extend(taken["rejections"])
    counts, guards = taken["canary"]
    canary = state.extender.canary_counts
    with canary._lock:
        for key, fields in counts.items():
            mine = canary._pending.setdefault(key, defaultdict(int))
            for field, value in fields.items():
                mine[field] += value
        canary._guards.update(guards)
