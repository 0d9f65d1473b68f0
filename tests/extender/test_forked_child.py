"""A child forked from the listener for a large body (issue 28, policies/extender/fork.py):
forked while another thread of the listener holds its locks, it still answers (its locks are
new), exactly as the listener would, and what its answer added to the runtime's records comes
back to the listener's. Real forks of this process: the child exits with os._exit."""

from __future__ import annotations

import gc
import os
import threading

import orjson
import pytest

from policies.extender import fork, offload
from policies.extender import runtime as runtime_module

from .conftest import args_body, example, go_pod


class _Holder:
    def __init__(self, lock) -> None:
        self.lock = lock
        self.other = threading.Lock()


class _Root:
    def __init__(self, shared) -> None:
        self.serve_lock = shared
        self.reentrant = threading.RLock()
        self.inner = _Holder(shared)


_Holder.__module__ = _Root.__module__ = "policies.tests_fake"  # walked as schedweb's own


def test_every_lock_is_new_and_free_and_a_shared_one_stays_shared():
    shared = threading.Lock()
    root = _Root(shared)
    shared.acquire()
    root.inner.other.acquire()
    fork.locks_renewed(root)
    assert root.serve_lock is not shared and root.serve_lock is root.inner.lock
    assert not root.serve_lock.locked() and not root.inner.other.locked()
    assert isinstance(root.reentrant, type(threading.RLock()))


class _Slotted:
    __slots__ = ("guard", "views")

    def __init__(self, guard, views) -> None:
        self.guard = guard
        self.views = views


_Slotted.__module__ = "policies.tests_fake"


def test_locks_in_slots_lists_and_dicts_are_renewed_and_a_large_container_is_not_walked():
    in_slot, in_list, in_dict, deep = (threading.Lock() for _ in range(4))
    large = [threading.Lock(), *range(fork.CONTAINER_MAX)]
    root = _Root(threading.Lock())
    root.slotted = _Slotted(in_slot, {"pending": [in_list], "by_name": {"a": in_dict}})
    root.pairs = (1, _Holder(deep))  # a tuple is walked into
    root.large = large
    for lock in (in_slot, in_list, in_dict, deep, large[0]):
        lock.acquire()
    fork.locks_renewed(root)
    renewed = [
        root.slotted.guard,
        root.slotted.views["pending"][0],
        root.slotted.views["by_name"]["a"],
        root.pairs[1].lock,
    ]
    assert all(isinstance(lock, type(threading.Lock())) for lock in renewed)
    assert not any(lock.locked() for lock in renewed)
    assert root.large[0] is large[0]  # the snapshot's size: its entries are not touched


def _locks_reachable(root) -> dict[int, tuple[object, str]]:
    """Every lock gc's referents reach from `root` through schedweb's objects and containers,
    by id, with its path (a cross-check of locks_renewed's own walk, which reads attributes and
    slots). The locks are held here: a freed one's id could be a new lock's."""
    found: dict[int, tuple[object, str]] = {}
    seen: set[int] = set()
    stack = [(root, type(root).__name__)]
    while stack:
        obj, path = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, fork._LOCK_TYPES):
            found[id(obj)] = (obj, path)
            continue
        container = isinstance(obj, dict | list | tuple | set | frozenset)
        if container and len(obj) > fork.CONTAINER_MAX:
            continue
        if not container and not type(obj).__module__.startswith("policies."):
            continue
        for referent in gc.get_referents(obj):
            stack.append((referent, f"{path}/{type(referent).__name__}"))
    return found


@pytest.mark.django_db
def test_no_lock_the_runtime_holds_through_its_own_objects_survives_the_renewal(publish, settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    publish(example("seed-003-name-length"))
    runtime_module.reset_runtime()
    state = runtime_module.runtime()
    state.extender.filter(args_body(go_pod("abc"), ["cp-1", "a-small-1"]))  # caches filled
    before = _locks_reachable(state)
    assert len(before) >= 5  # the serve lock, metrics', the canary counts', the shadows', ...
    fork.locks_renewed(state)
    after = _locks_reachable(state)
    assert not {path for key, (_lock, path) in before.items() if key in after}
    assert len(after) == len(before)
    runtime_module.reset_runtime()


def _serve_and_wait(lock: threading.Lock, held: threading.Event, release: threading.Event):
    with lock:
        held.set()
        release.wait(30)


@pytest.mark.django_db
def test_a_child_forked_while_another_thread_holds_the_locks_answers_and_its_records_come_back(
    publish, settings
):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    publish(example("seed-003-name-length"))
    runtime_module.reset_runtime()
    state = runtime_module.runtime()
    body = args_body(go_pod("abc"), ["cp-1", "a-small-1"])
    expected = state.extender.filter(body)
    before = state.metrics.totals().get("requests|filter|200", 0)
    held, release = threading.Event(), threading.Event()
    # another thread of the listener in the middle of a metrics update: its lock held at the fork
    holder = threading.Thread(
        target=_serve_and_wait, args=(state.metrics._lock, held, release), daemon=True
    )
    holder.start()
    assert held.wait(30)
    try:
        child = fork.Child(state, offload._child_main)
    finally:
        release.set()
        holder.join(30)
    stream = child.socket.makefile("rwb")
    stream.write(b"filter\n" + offload._LENGTH.pack(len(body)) + body)
    stream.write(offload._LENGTH.pack(offload._END))
    stream.flush()
    child.socket.settimeout(60)  # a child stuck on a copied lock would never answer
    status, policy_length, length = offload._ANSWER.unpack(stream.read(offload._ANSWER.size))
    policy = stream.read(policy_length).decode()
    answer = stream.read(length)
    (effects_length,) = offload._LENGTH.unpack(stream.read(offload._LENGTH.size))
    effects = stream.read(effects_length)
    child.close()
    assert (status, answer, policy) == (expected.status, expected.body, expected.policy)
    fork.effects_merge(state, effects)
    assert state.metrics.totals()["requests|filter|200"] == before + 1  # the child's one answer
    assert orjson.loads(answer)["NodeNames"]
    with pytest.raises(ChildProcessError):  # reaped
        os.waitpid(child.pid, os.WNOHANG)
    runtime_module.reset_runtime()


def test_a_child_whose_body_is_abandoned_ends_without_an_answer(publish, settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    runtime_module.reset_runtime()
    child = fork.Child(runtime_module.runtime(), offload._child_main)
    child.socket.sendall(b"filter\n" + offload._LENGTH.pack(offload._ABANDONED))
    child.socket.settimeout(60)
    assert child.socket.recv(1) == b""  # it ended: nothing sent, its channel closed
    _pid, status = os.waitpid(child.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    child.socket.close()
    runtime_module.reset_runtime()


def test_a_body_gets_a_503_when_no_child_can_be_forked_and_the_place_is_given_back(
    publish, settings, monkeypatch
):
    """fork() refused (no memory or no processes left): the body gets the pool's 503, which
    kube-scheduler retries, and its place is free for the next body, which gets its answer."""
    import asyncio
    import errno

    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    publish(example("seed-003-name-length"))
    runtime_module.reset_runtime()
    state = runtime_module.runtime()
    body = args_body(go_pod("abc"), ["cp-1", "a-small-1"])
    real_fork = os.fork

    def refused() -> int:
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    pool = offload.Offload(workers=1, queue=0)

    async def answer() -> tuple[int, bytes, str]:
        async with pool.place():
            return await pool.answer("filter", body)

    async def both() -> list[tuple[int, bytes, str]]:
        monkeypatch.setattr(os, "fork", refused)
        first = await answer()
        monkeypatch.setattr(os, "fork", real_fork)
        return [first, await asyncio.wait_for(answer(), 60)]

    try:
        (status, refusal, _policy), second = asyncio.run(both())
    finally:
        pool.close()
        runtime_module.reset_runtime()
    assert (status, orjson.loads(refusal)["error"]) == (503, "busy")
    expected = state.extender.filter(body)
    assert second == (expected.status, expected.body, expected.policy)
