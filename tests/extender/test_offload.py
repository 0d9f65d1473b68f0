"""Large bodies are answered by a process forked from the listener for each of them, off the
listener's event loop (issues 14 and 28).

The listener runs as shipped (`python -m schedweb.extender_server`, plain HTTP on loopback, one
uvicorn worker) with a low inline limit, over a Redis database of its own into which the test
publishes; the demo cluster is the snapshot on both sides, so the in-process service computes the
expected answers.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest

from policies.extender.runtime import runtime
from tests.harness.processes import ManagedProcess, free_ports
from tests.listeners import read_until_closed
from tests.redisdb import redis_url

from .conftest import args_body, example, go_pod

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv" / "bin" / "python"
INLINE = 16_384  # bytes: the test's inline limit, so that moderate bodies are offloaded
REDIS_DB = 13


@contextlib.contextmanager
def _listener_process(tmp_path, policy: str, **extra_env: str):
    """The listener in a subprocess on Redis database REDIS_DB (already selected), ready when a
    large body (the worker process) answers with `policy`'s first version; yields its port."""
    (port,) = free_ports(count=1)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "schedweb.settings",
        "SCHEDWEB_DEBUG": "0",
        "SCHEDWEB_SECRET_KEY": "offload-test",
        "SCHEDWEB_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SCHEDWEB_REDIS_URL": redis_url(REDIS_DB),
        "SCHEDWEB_CLUSTER_SOURCE": "demo",
        "SCHEDWEB_EXTENDER_PORT": str(port),
        "SCHEDWEB_EXTENDER_WORKERS": "1",
        "SCHEDWEB_EXTENDER_INLINE_BODY_BYTES": str(INLINE),
        "SCHEDWEB_EXTENDER_OFFLOAD_WORKERS": "1",
        "SCHEDWEB_EXTENDER_OFFLOAD_QUEUE": "0",
        "SCHEDWEB_LOG_LEVEL": "WARNING",
        **extra_env,
    }
    process = ManagedProcess(
        name="extender",
        argv=[PYTHON, "-m", "schedweb.extender_server"],
        log_path=tmp_path / "extender.log",
        env=env,
        cwd=ROOT,
    )
    process.start()
    try:
        body = _padded_filter(go_pod("abc"))
        process.wait_ready(
            check=lambda: _post(port, "filter", body)[2] == f"{policy}/v1",
            timeout=60,
            what="the offloaded answer with the published policy",
        )
        yield port
    finally:
        process.stop(grace=5)


@pytest.fixture
def listener(settings, tmp_path, publish):
    """The extender's listener's port (a subprocess on Redis database REDIS_DB)."""
    # The publish fixture uses database 12 in this process; the listener and its pool must see
    # the same data, so both point at REDIS_DB.
    from tests.redisdb import redis_database

    with redis_database(settings, REDIS_DB):
        publish(example("seed-003-name-length"))
        with _listener_process(tmp_path, "seed-003-name-length") as port:
            yield port


def _padded_filter(pod: dict, *, extra: int = 2000) -> bytes:
    """A nodeCacheCapable filter over two demo nodes and `extra` names no snapshot knows: over
    the inline limit."""
    names = ["cp-1", "a-small-1"] + [f"nowhere-{i:05d}" for i in range(extra)]
    body = args_body(pod, names)
    assert len(body) > INLINE
    return body


def _hostile() -> bytes:
    """200000 bare Node objects (about 7 MB), as in issue 14."""
    nodes = [{"metadata": {"name": f"n{i:07d}"}} for i in range(200_000)]
    return orjson.dumps({"Pod": go_pod("abc"), "Nodes": {"items": nodes}, "NodeNames": None})


def _post(port: int, verb: str, body: bytes, *, timeout: float = 60) -> tuple[int, bytes, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("POST", f"/extender/{verb}", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read(), response.getheader("X-Schedweb-Policy", "")
    finally:
        connection.close()


@pytest.mark.django_db
def test_a_large_body_gets_the_same_answer_as_the_service_gives(listener, settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    for verb in ("filter", "prioritize"):
        body = _padded_filter(go_pod("abc"))
        status, answer, policy = _post(listener, verb, body)
        direct = getattr(runtime().extender, verb)(body)
        assert (status, answer, policy) == (direct.status, direct.body, direct.policy)


def _head(length: int, extra: str = "") -> bytes:
    """The headers of a filter whose body is `length` bytes."""
    return (
        "POST /extender/filter HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n{extra}\r\n"
    ).encode()


def _listener_pid(port: int) -> int:
    """The listener's process (not a child it forked for a body: those share its command line
    and environment)."""
    found = {
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit()
        and f"SCHEDWEB_EXTENDER_PORT={port}".encode() in _environ(p)
        and b"schedweb.extender_server" in _cmdline(p)
    }
    [server] = [pid for pid in found if _parent(pid) not in found]
    return server


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _lane_processes(server: int) -> set[int]:
    """The pids of the shadow lane's process (spawned) of the listener whose pid is `server`."""
    return {pid for pid in _children(server) if b"spawn_main" in _cmdline(Path(f"/proc/{pid}"))}


def _forked(server: int) -> set[int]:
    """The pids of the children the listener whose pid is `server` forked for bodies (its own
    command line; not the lane, not multiprocessing's resource tracker)."""
    own = _cmdline(Path(f"/proc/{server}"))
    return {pid for pid in _children(server) if _cmdline(Path(f"/proc/{pid}")) == own}


def _forked_for(port: int, count: int = 1) -> set[int]:
    """The listener's forked children once there are `count` (each body that took a place in
    the pool has one from its headers on)."""
    server = _listener_pid(port)
    deadline = time.monotonic() + 30
    while len(children := _forked(server)) < count:
        assert time.monotonic() < deadline, f"the listener forked {children}, not {count}"
        time.sleep(0.02)
    return children


@contextlib.contextmanager
def _children_stopped(port: int):
    """The children answering bodies stopped (SIGSTOP) for the block: a body handed to one is
    worked on until the block ends, however fast this machine would have answered it."""
    children = _forked_for(port)
    for pid in children:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def _holding_the_pool(port: int, length: int) -> socket.socket:
    """A connection whose filter of `length` bytes holds a place in the pool: sent with Expect:
    100-continue and no body yet, it returns once the listener's 100 Continue says the place is
    taken (a large body takes it at its headers; the listener asks for the body only then)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(_head(length, "Expect: 100-continue\r\n"))
    interim = b""
    while b"\r\n\r\n" not in interim:
        chunk = sock.recv(65536)
        assert chunk, interim
        interim += chunk
    assert interim.startswith(b"HTTP/1.1 100 "), interim
    return sock


def _answer_to(sock: socket.socket, body: bytes) -> tuple[int, bytes]:
    """Sends `body` on a connection _holding_the_pool made; its answer (status, body)."""
    sock.sendall(body)
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response.status, response.read()


@pytest.mark.django_db
def test_small_filters_and_healthz_are_answered_while_a_hostile_body_is_parsed(listener):
    # The worker holding the hostile body is stopped until the small ones have their answers:
    # they are answered during its parse whatever the parse costs on this machine (how fast is
    # bench/hostile.py's). Parsed inline, on this listener's loop, it held every one of them up.
    small = args_body(go_pod("abc"), ["cp-1", "a-small-1"])
    body = _hostile()
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The hostile body holds the pool's one place before anything else is sent (sent at
        # once, a probe for a full pool could take the place first and have it refused).
        holder = _holding_the_pool(listener, len(body))
        holder.settimeout(300)
        with _children_stopped(listener):
            hostile = pool.submit(_answer_to, holder, body)
            answers = [_post(listener, "filter", small) for _ in range(20)]
            connection = http.client.HTTPConnection("127.0.0.1", listener, timeout=60)
            connection.request("GET", "/healthz")
            healthz = connection.getresponse().status
            connection.close()
            assert not hostile.done()  # still with the child
        hostile_status = hostile.result()[0]
        holder.close()
    assert [status for status, _answer, _policy in answers] == [200] * 20
    assert {answer for _status, answer, _policy in answers} == {
        runtime().extender.filter(small).body
    }
    # 200000 Nodes: past the most candidates a request may name (protocol.MAX_CANDIDATES)
    assert (healthz, hostile_status) == (200, 400)


@pytest.mark.django_db
def test_large_bodies_past_the_pool_s_capacity_get_a_503_at_once(listener):
    """One place, no queue: a large body takes the pool's place when its headers arrive (it is
    streamed to the child forked for it as it comes); while it holds it (its body not sent, for
    as long as the test needs), the next large ones are refused at their headers, before their
    body is read, and their connection is closed."""
    body = _padded_filter(go_pod("abc"))
    with ThreadPoolExecutor(max_workers=1) as pool:
        # Its headers read while the pool has room: the listener's 100 Continue says so.
        early = _holding_the_pool(listener, len(body))
        refused = pool.submit(_post, listener, "filter", body)
        status, answer, _policy = refused.result()
        assert (status, orjson.loads(answer)["error"]) == (503, "busy")
        answering = pool.submit(_answer_to, early, body)
        status, answer = answering.result()
        answered = status, orjson.loads(answer)
        early.close()
    assert answered == (200, orjson.loads(runtime().extender.filter(body).body))


def test_a_chunked_body_takes_a_place_in_the_pool_once_it_grows_past_the_inline_limit(listener):
    """Without a Content-Length the body is checked as it arrives: while the pool is full, a
    chunked body is refused once it is larger than the inline limit, the rest unread."""
    body = _padded_filter(go_pod("abc"))
    head = _head(0).replace(b"Content-Length: 0\r\n", b"Transfer-Encoding: chunked\r\n")
    holder = _holding_the_pool(listener, len(body))  # the pool's one place, its body not sent
    with socket.create_connection(("127.0.0.1", listener), timeout=60) as sock:
        sock.sendall(head)
        piece = 4096
        with contextlib.suppress(OSError):  # refused and closed while this still sends
            for _ in range(2 * INLINE // piece):  # never the last chunk: never complete
                sock.sendall(b"%x\r\n" % piece + b"x" * piece + b"\r\n")
        answer = read_until_closed(sock)
    holder.close()
    assert answer.startswith(b"HTTP/1.1 503 "), answer[:200]
    assert b"connection: close" in answer


@pytest.mark.django_db
def test_a_bind_body_over_the_inline_limit_is_refused(listener):
    status, answer, _policy = _post(listener, "bind", b'{"PodName": "' + b"x" * INLINE + b'"}')
    assert status == 413 and str(INLINE) in orjson.loads(answer)["detail"]


def _children(pid: int) -> set[int]:
    """Live processes whose parent is `pid` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.django_db
def test_a_forked_child_ends_when_the_listener_is_killed(listener):
    server = _listener_pid(listener)
    holder = _holding_the_pool(listener, len(_padded_filter(go_pod("abc"))))
    children = _forked_for(listener)  # waiting for the body that never comes
    os.kill(server, 9)  # no shutdown of its own: the kernel ends its children (PDEATHSIG)
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in children):
        assert time.monotonic() < deadline, f"forked children {children} outlived the listener"
        time.sleep(0.05)
    holder.close()


def _environ(proc: Path) -> bytes:
    try:
        return (proc / "environ").read_bytes()
    except OSError:
        return b""


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


DRAIN = """
name: no-drain
schedulerNames: [schedweb]
failurePolicy: Ignore
filters:
  - name: not-draining
    expression: '!("drain" in node.labels)'
"""


@pytest.mark.django_db
def test_a_worker_answers_over_the_snapshot_as_it_is_when_the_body_arrives(
    settings, tmp_path, publish
):
    """The pool's processes do not follow every cluster change between large bodies (CPU the
    scheduler needs, issue 13): each body brings the snapshot up to date first."""
    from policies.cluster.demo import demo_objects
    from policies.cluster.state import ClusterState
    from policies.cluster.store import NODE, SnapshotStore, SnapshotWriter
    from tests.redisdb import redis_database

    with redis_database(settings, REDIS_DB) as client:
        store = SnapshotStore("offload-live", client=client)
        writer = SnapshotWriter(store)
        nodes, pods = demo_objects()
        state = ClusterState.from_objects(nodes, pods)
        writer.full(state, reset=True)
        store.meta_write({"status": "ok", "heartbeat_at": time.time()})
        publish(DRAIN)
        with _listener_process(
            tmp_path,
            "no-drain",
            SCHEDWEB_CLUSTER_SOURCE="live",
            SCHEDWEB_CLUSTER_NAME="offload-live",
        ) as port:
            body = _padded_filter(go_pod("abc"))
            first = orjson.loads(_post(port, "filter", body)[1])
            assert "a-small-1" in first["NodeNames"] and "cp-1" in first["NodeNames"]
            node = next(n for n in nodes if n["metadata"]["name"] == "a-small-1")
            node["metadata"]["labels"]["drain"] = "yes"
            view = state.apply_node(node)
            writer.deltas([(NODE, orjson.dumps(view["object"]))])
            store.meta_write({"status": "ok", "heartbeat_at": time.time()})
            # No wait: the worker reads Redis when the body arrives.
            second = orjson.loads(_post(port, "filter", body)[1])
            assert "a-small-1" not in second["NodeNames"] and "cp-1" in second["NodeNames"]
            rejected = second["FailedNodes"] | second["FailedAndUnresolvableNodes"]
            assert rejected["a-small-1"].startswith("not-draining")


def _node_mode(count: int) -> bytes:
    """A nodeCacheCapable=false filter of `count` minimal Node objects no snapshot knows: small
    in bytes (well under the inline limit), much work (issue 27: 130 KB held 4000 of them)."""
    nodes = [{"metadata": {"name": f"n{i:04d}"}} for i in range(count)]
    body = orjson.dumps({"Pod": go_pod("abc"), "Nodes": {"items": nodes}, "NodeNames": None})
    assert len(body) < INLINE
    return body


@pytest.mark.django_db
def test_a_small_body_of_many_nodes_is_answered_by_the_pool_and_in_order(listener):
    """Offloaded by its item count (SCHEDWEB_EXTENDER_INLINE_NODES, 100) though it is under the
    inline byte limit: while the pool's one place is held it gets the pool's 503 (answered
    inline, it would get a 200, as normal filters do meanwhile); then, pipelined before a
    normal filter on one connection, the two are answered in order."""
    heavy = _node_mode(300)
    small = args_body(go_pod("abc"), ["cp-1", "a-small-1"])
    holder = _holding_the_pool(listener, len(_padded_filter(go_pod("abc"))))
    status, answer, _policy = _post(listener, "filter", heavy)
    assert (status, orjson.loads(answer)["error"]) == (503, "busy")
    answers = [_post(listener, "filter", small) for _ in range(10)]
    assert [status for status, _answer, _policy in answers] == [200] * 10
    holder.close()
    pipelined = _head(len(heavy)) + heavy + _head(len(small)) + small
    deadline = time.monotonic() + 60
    while True:  # the held place is given back once the listener sees the holder leave
        with socket.create_connection(("127.0.0.1", listener), timeout=60) as sock:
            sock.sendall(pipelined)
            stream = sock.makefile("rb")
            (first_status, first_body) = _response(stream)
            if first_status != 503:
                second_status, second_body = _response(stream)
                break
        assert time.monotonic() < deadline, first_body
        time.sleep(0.05)
    assert (first_status, second_status) == (200, 200)
    assert len(first_body["Nodes"]["items"]) == 300  # the child's answer: every node passes
    assert second_body == orjson.loads(runtime().extender.filter(small).body)


def _response(stream) -> tuple[int, dict]:
    """The next response on a connection's buffered stream: (status, JSON body)."""
    status = int(stream.readline().split()[1])
    length = 0
    while (line := stream.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return status, orjson.loads(stream.read(length))


@pytest.mark.django_db
def test_a_child_that_dies_fails_only_its_body(listener):
    body = _padded_filter(go_pod("abc"))
    holder = _holding_the_pool(listener, len(body))
    (child,) = _forked_for(listener)
    os.kill(child, signal.SIGKILL)
    status, answer = _answer_to(holder, body)
    holder.close()
    assert status == 503, answer  # never a 500 (uvloop's closed transport, issue 22's stress)
    assert orjson.loads(answer)["error"] == "busy"
    status, answer, _policy = _post(listener, "filter", body)  # a child of its own
    assert (status, answer) == (200, runtime().extender.filter(body).body)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child}").exists():  # reaped by the listener, never left a zombie
        assert time.monotonic() < deadline, f"the killed child {child} was not reaped"
        time.sleep(0.05)


@pytest.mark.django_db
def test_no_process_holds_a_second_snapshot_between_large_bodies(listener):
    """Issue 28: the pool's processes each held a copy of the snapshot (a second one in every
    extender pod). A child forked for a body shares the listener's pages and ends with its
    answer: once the answers are in, the listener has no child left (each reaped), and only
    the listener's process reports what it serves."""
    from policies.publishing import served_read
    from policies.redis import redis_client

    server = _listener_pid(listener)
    body = _padded_filter(go_pod("abc"))
    for verb in ("filter", "prioritize", "filter"):
        assert _post(listener, verb, body)[0] == 200
    deadline = time.monotonic() + 30
    while _children(server):
        assert time.monotonic() < deadline, f"children left: {_children(server)}"
        time.sleep(0.05)
    roles = {r.get("pid"): r.get("role") for r in served_read(redis_client())}  # REDIS_DB's
    assert roles == {server: "listener"}, roles
