"""The extender listener's direct path (schedweb/extender_http.py) answers exactly as the ASGI
path (schedweb/asgi.py) does, keeps HTTP/1.1's framing (keep-alive, pipelining, Connection: close,
requests in several segments), and leaves every request it does not take to the ASGI path with
its answer unchanged.

Against one real `python -m schedweb.extender_server` on 127.0.0.1 (plain HTTP, demo cluster,
seed-003 published in its Redis before it starts), with raw sockets wherever framing matters;
the shutdown test stops a listener of its own.
The same request is sent down the ASGI path by a query string (`?x=1`) or a chunked body, which
the direct path never takes. The last tests feed bytes to an ExtenderHttpProtocol whose ASGI
application fails the test if called: there, and only there, the transport is a stand-in.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import signal
import socket
import threading
import time
from pathlib import Path

import orjson
import pytest
from django.test import override_settings

from tests.e2e.stack import RedisServer
from tests.extender.conftest import args_body, extender_redis, go_pod, publish  # noqa: F401
from tests.listeners import connect, read_until_closed, start_extender

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"
POLICY = "seed-003-name-length"
POLICY_HEADER = f"{POLICY}/v1"
INLINE = 4096  # SCHEDWEB_EXTENDER_INLINE_BODY_BYTES of the listener under test
MAX_BODY = 16384  # SCHEDWEB_EXTENDER_MAX_BODY_BYTES
NAMES = ["cp-1", "a-small-1"]
STOPPED = 2.0  # seconds a client's send blocks before the test takes the server as not reading

FILTER = args_body(go_pod("abc"), NAMES)  # a 3-character name: seed-003 lets it through
FILTER_REJECTED = args_body(go_pod("abcdefg"), NAMES)  # 7 characters: unresolvable everywhere
FILTER_UNSERVED = args_body(go_pod("abc", scheduler="nobody-targets-this"), NAMES)
PRIORITIZE = FILTER
PREEMPT = orjson.dumps(
    {
        "Pod": go_pod("abc"),
        "NodeNameToMetaVictims": {"cp-1": {"Pods": [{"UID": "u"}], "NumPDBViolations": 0}},
    }
)
# Names that make a filter body larger than INLINE but within MAX_BODY.
MANY_NAMES = [f"node-{i:04d}" for i in range(600)]


def _publish_into(redis_url: str, document: str) -> None:
    """`document` as the published set in the listener's Redis (what the distribution task
    writes), before the listener starts: its runtime loads it at startup."""
    import yaml

    from policies.publishing import active_entries_write
    from policies.redis import redis_client

    with override_settings(REDIS_URL=redis_url):
        redis_client.cache_clear()
        try:
            active_entries_write(
                [
                    {
                        "name": yaml.safe_load(document)["name"],
                        "version": 1,
                        "document": document,
                        "contentHash": hashlib.sha256(document.encode()).hexdigest(),
                        "schedulerNames": yaml.safe_load(document)["schedulerNames"],
                        "activatedAt": "2026-11-22T00:00:00+00:00",
                    }
                ]
            )
        finally:
            redis_client.cache_clear()


@pytest.fixture(scope="module")
def port(tmp_path_factory):
    """The port of one extender listener (one worker) serving seed-003."""
    workdir = tmp_path_factory.mktemp("direct-path")
    redis = RedisServer(workdir / "redis").start()
    process = None
    try:
        _publish_into(redis.url, (EXAMPLES / f"{POLICY}.yaml").read_text())
        process, port = start_extender(
            workdir,
            redis_url=redis.url,
            SCHEDWEB_EXTENDER_WORKERS="1",
            SCHEDWEB_EXTENDER_INLINE_BODY_BYTES=str(INLINE),
            SCHEDWEB_EXTENDER_MAX_BODY_BYTES=str(MAX_BODY),
            # A client that stops reading leaves its last request half read while it waits
            # STOPPED seconds and then drains its answers; that request's deadlines count all of
            # it (the client's time). Deadlines far past what a loaded machine takes for that;
            # test_stalled_connections.py tests them.
            SCHEDWEB_HEADER_TIMEOUT_SECONDS="600",
            SCHEDWEB_BODY_TIMEOUT_SECONDS="600",
        )
        yield port
    finally:
        if process is not None:
            process.stop(grace=5)
        redis.stop()


# --- requests and responses on the wire ---------------------------------------------------------


def post(
    path: str,
    body: bytes,
    *,
    host: str = "127.0.0.1",
    content_type: str = "application/json",
    extra: str = "",
    version: str = "HTTP/1.1",
) -> bytes:
    """A POST with a Content-Length body, as Go's client writes it."""
    return (
        f"POST {path} {version}\r\nHost: {host}\r\nUser-Agent: Go-http-client/1.1\r\n"
        f"Content-Length: {len(body)}\r\nContent-Type: {content_type}\r\n{extra}"
        "Accept-Encoding: gzip\r\n\r\n"
    ).encode() + body


def post_chunked(path: str, body: bytes, *, piece: int = 100) -> bytes:
    """The same POST with a chunked body (which the direct path never takes)."""
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(body[i : i + piece]), body[i : i + piece])
        for i in range(0, len(body), piece)
    )
    return (
        (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        ).encode()
        + chunks
        + b"0\r\n\r\n"
    )


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


class Response:
    def __init__(self, head: bytes, body: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        self.status_line = lines[0]
        self.status = int(lines[0].split(" ")[1])
        self.header_list = [tuple(line.split(": ", 1)) for line in lines[1:]]
        self.headers = {name.lower(): value for name, value in self.header_list}
        self.body = body

    def json(self):
        return orjson.loads(self.body)

    def comparable(self) -> tuple:
        """Everything but the date's value: status line, header names and values in order,
        body bytes."""
        headers = [(n, "<date>" if n == "date" else v) for n, v in self.header_list]
        return self.status_line, headers, self.body


class Wire:
    """A raw client connection that reads responses one at a time, by their Content-Length, so
    that pipelined answers and stray bytes show."""

    def __init__(self, port: int, *, timeout: float = 30.0) -> None:
        self.sock = connect(port, timeout=timeout)
        self.buffer = b""

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()

    def send(self, data: bytes) -> Wire:
        self.sock.sendall(data)
        return self

    def _more(self) -> None:
        chunk = self.sock.recv(65536)
        assert chunk, f"the server closed the connection; unread: {self.buffer[:200]!r}"
        self.buffer += chunk

    def response(self) -> Response:
        while b"\r\n\r\n" not in self.buffer:
            self._more()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        response = Response(head, b"")
        if response.status == 100:  # an interim answer: no body
            return response
        length = int(response.headers["content-length"])
        while len(self.buffer) < length:
            self._more()
        response.body, self.buffer = self.buffer[:length], self.buffer[length:]
        return response

    def closed_after(self) -> bytes:
        """What else the server sends before it closes the connection (b"" for nothing)."""
        rest = self.buffer + read_until_closed(self.sock)
        self.buffer = b""
        return rest


def exchange(port: int, data: bytes) -> Response:
    with Wire(port) as wire:
        return wire.send(data).response()


# --- 1. a kept-alive connection --------------------------------------------------------------


def test_filter_prioritize_and_preempt_in_a_row_on_one_kept_alive_connection(port):
    with Wire(port) as wire:
        for _ in range(3):  # kube-scheduler's sequence, pod after pod
            filtered = wire.send(post("/extender/filter", FILTER)).response()
            prioritized = wire.send(post("/extender/prioritize", PRIORITIZE)).response()
            preempted = wire.send(post("/extender/preempt", PREEMPT)).response()
            unserved = wire.send(post("/extender/filter", FILTER_UNSERVED)).response()
            rejected = wire.send(post("/extender/filter", FILTER_REJECTED)).response()
            for response in (filtered, prioritized, preempted, unserved, rejected):
                assert response.status_line == "HTTP/1.1 200 OK"
                assert response.headers["content-type"] == "application/json"
                assert response.headers["content-length"] == str(len(response.body))
                assert "connection" not in response.headers  # kept alive
            assert wire.buffer == b""  # nothing but the answers

            assert filtered.json() == {
                "NodeNames": NAMES,
                "Nodes": None,
                "FailedNodes": {},
                "FailedAndUnresolvableNodes": {},
                "Error": "",
            }
            assert filtered.headers["x-schedweb-policy"] == POLICY_HEADER
            # seed-003: 20 - len(node name), min-max scaled: cp-1 best, a-small-1 worst
            assert prioritized.json() == [
                {"Host": "cp-1", "Score": 10},
                {"Host": "a-small-1", "Score": 0},
            ]
            assert prioritized.headers["x-schedweb-policy"] == POLICY_HEADER
            assert set(preempted.json()) == {"NodeNameToMetaVictims"}
            assert preempted.headers["x-schedweb-policy"] == POLICY_HEADER
            # no published policy serves that schedulerName: every node passes, and says so
            assert unserved.json()["NodeNames"] == NAMES
            assert unserved.headers["x-schedweb-policy"] == "none"
            failed = rejected.json()
            assert failed["NodeNames"] == [] and failed["Error"] == ""
            assert set(failed["FailedAndUnresolvableNodes"]) == set(NAMES)
            assert "is 7 characters" in failed["FailedAndUnresolvableNodes"]["cp-1"]
            assert rejected.headers["x-schedweb-policy"] == POLICY_HEADER


# --- 2. parity with the ASGI path ------------------------------------------------------------

BODIES = {
    "passes": FILTER,
    "rejected": FILTER_REJECTED,
    "no policy serves it": FILTER_UNSERVED,
    "preempt shape": PREEMPT,
    "malformed JSON": b"{not json",
    "empty object": b"{}",
    "JSON null": b"null",
    "empty body": b"",
    "not UTF-8": b'{"Pod": "\xff"}',
}


@pytest.mark.parametrize("verb", ["filter", "prioritize", "preempt"])
@pytest.mark.parametrize("case", list(BODIES))
def test_the_direct_answer_is_the_asgi_answer_byte_for_byte(port, verb, case):
    body = BODIES[case]
    with Wire(port) as wire:
        direct = wire.send(post(f"/extender/{verb}", body)).response()
        by_query = wire.send(post(f"/extender/{verb}?x=1", body)).response()
        if body:  # a chunked body needs at least one chunk to say the same
            chunked = wire.send(post_chunked(f"/extender/{verb}", body)).response()
            assert chunked.comparable() == direct.comparable()
    assert by_query.comparable() == direct.comparable()
    if case == "malformed JSON":  # a clear error, never a 500
        assert direct.status == 400 and "not JSON" in direct.json()["detail"]
    else:
        assert direct.status in (200, 400), direct.body


# --- 3. pipelining ---------------------------------------------------------------------------


def test_pipelined_requests_mixing_both_paths_are_answered_in_order(port):
    with Wire(port) as wire:
        wire.send(
            post("/extender/filter", FILTER)
            + get("/healthz")
            + post("/extender/prioritize", PRIORITIZE)
            + post("/extender/filter?x=1", FILTER_REJECTED)  # ASGI, then a direct one behind it
            + post("/extender/filter", FILTER_UNSERVED)
            + get("/extender/filter")
        )
        answers = [wire.response() for _ in range(6)]
        assert wire.buffer == b""
        # and the connection is still usable
        assert wire.send(post("/extender/filter", FILTER)).response().json()["NodeNames"] == NAMES
    assert [a.status for a in answers] == [200, 200, 200, 200, 200, 405]
    assert answers[0].json()["NodeNames"] == NAMES
    assert answers[1].json() == {"status": "ok"}
    assert answers[2].json()[0] == {"Host": "cp-1", "Score": 10}
    assert set(answers[3].json()["FailedAndUnresolvableNodes"]) == set(NAMES)
    assert answers[4].headers["x-schedweb-policy"] == "none"
    assert answers[5].headers["allow"] == "POST"


def test_direct_requests_pipelined_in_one_send_are_each_answered_once(port):
    verbs = ["filter", "prioritize", "preempt", "filter", "prioritize"]
    bodies = [FILTER, PRIORITIZE, PREEMPT, FILTER_REJECTED, PRIORITIZE]
    with Wire(port) as wire:
        wire.send(b"".join(post(f"/extender/{v}", b) for v, b in zip(verbs, bodies, strict=True)))
        answers = [wire.response() for _ in verbs]
        alone = [
            exchange(port, post(f"/extender/{v}", b)) for v, b in zip(verbs, bodies, strict=True)
        ]
        assert wire.buffer == b""
    assert [a.comparable() for a in answers] == [a.comparable() for a in alone]


def test_a_client_that_pipelines_without_reading_is_stopped_then_answered_in_full(port):
    """The server stops reading a connection whose answers pile up unread (as the ASGI path
    does), instead of buffering answers without bound; once the client reads, every request is
    answered. The client's send blocking for STOPPED seconds is the sign it stopped reading: a
    slow server could only make that come early, never keep it from coming."""
    names = [f"node-{i:05d}" for i in range(200)]  # an answer about as large as the request
    body = args_body(go_pod("abc"), names)
    assert len(body) <= INLINE  # the direct path's
    request = post("/extender/filter", body)
    cap = 64 * 1_048_576  # what a server that never stops reading would take in
    with Wire(port) as wire:
        wire.sock.settimeout(STOPPED)
        sent = 0
        try:
            while sent < cap:
                sent += wire.sock.send(request[sent % len(request) :])
        except TimeoutError:
            pass
        assert sent < cap, "the server read 64 MB of requests whose answers were not read"
        complete, partial = divmod(sent, len(request))
        wire.sock.settimeout(30.0)
        rest = threading.Thread(target=wire.sock.sendall, args=(request[partial:],))
        rest.start()  # the rest of the last request, while its answers are read
        try:
            answers = [wire.response() for _ in range(complete + 1)]
        finally:
            rest.join()
        follow_up = wire.send(get("/healthz")).response()
        assert wire.buffer == b""
    assert all(a.status == 200 and a.json()["NodeNames"] == names for a in answers)
    assert follow_up.json() == {"status": "ok"}


# --- 4. Connection: close --------------------------------------------------------------------


def test_connection_close_on_a_direct_request_is_answered_then_closed(port):
    with Wire(port) as wire:
        wire.send(post("/extender/filter", FILTER, extra="Connection: close\r\n"))
        response = wire.response()
        assert wire.closed_after() == b""
    assert response.status == 200 and response.headers["connection"] == "close"
    assert response.json()["NodeNames"] == NAMES
    assert response.headers["x-schedweb-policy"] == POLICY_HEADER


@pytest.mark.parametrize("path", ["/extender/filter", "/extender/filter?x=1"])
def test_a_request_pipelined_behind_connection_close_is_not_answered(port, path):
    with Wire(port) as wire:
        wire.send(post(path, FILTER, extra="Connection: close\r\n") + post(path, FILTER_REJECTED))
        response = wire.response()
        assert wire.closed_after() == b""  # on both paths: the close ends the connection
    assert response.json()["NodeNames"] == NAMES


def test_a_direct_request_in_flight_at_shutdown_is_answered_before_the_listener_exits(tmp_path):
    """SIGTERM while kube-scheduler's call is half sent (a rolling restart): uvicorn waits for
    the connection, the call is answered with connection: close, then the process exits."""
    redis = RedisServer(tmp_path / "redis").start()
    process = None
    try:
        process, own_port = start_extender(
            tmp_path, redis_url=redis.url, SCHEDWEB_EXTENDER_WORKERS="1"
        )
        request = post("/extender/filter", FILTER)
        with Wire(own_port) as wire:
            assert wire.send(get("/healthz")).response().status == 200  # the loop serves us
            wire.send(request[:-10])
            os.kill(process.pid, signal.SIGTERM)
            log = tmp_path / "extender.log"
            deadline = time.monotonic() + 30
            while b"Waiting for connections to close" not in log.read_bytes():
                assert process.exit_code() is None, log.read_text()[-2000:]
                assert time.monotonic() < deadline, log.read_text()[-2000:]
                time.sleep(0.05)
            wire.send(request[-10:])
            response = wire.response()
            assert wire.closed_after() == b""
        assert response.status == 200 and response.headers["connection"] == "close"
        assert response.json()["NodeNames"] == NAMES
        while process.exit_code() is None:  # and then the listener is gone
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.05)
    finally:
        if process is not None:
            process.stop(grace=10)
        redis.stop()


# --- 5. what the direct path leaves to the ASGI path -----------------------------------------


def test_a_host_not_allowed_is_a_400(port):
    response = exchange(port, post("/extender/filter", FILTER, host="evil.example"))
    assert (response.status, response.json()) == (400, {"Error": "Host not allowed"})
    assert "x-schedweb-policy" not in response.headers


@pytest.mark.parametrize(
    "headers",
    [
        "Host: evil.example\r\nHost: 127.0.0.1\r\n",
        "Host: 127.0.0.1\r\nHost: evil.example\r\n",
    ],
)
def test_a_repeated_host_is_a_400_on_both_paths(port, headers):
    """RFC 9112 section 3.2: a request with more than one Host is a 400, whichever comes first
    (issue 27: an allowed Host first let the request through)."""
    request = (
        f"POST /extender/filter HTTP/1.1\r\n{headers}Content-Type: application/json\r\n"
        f"Content-Length: {len(FILTER)}\r\n\r\n"
    ).encode() + FILTER
    direct = exchange(port, request)
    asgi = exchange(port, request.replace(b"/extender/filter", b"/extender/filter?x=1", 1))
    assert direct.comparable() == asgi.comparable()
    assert direct.status == 400, direct.body


def test_a_repeated_content_length_is_refused_by_the_parser_on_both_paths(port):
    request = post("/extender/filter", FILTER).replace(
        b"\r\n\r\n", f"\r\nContent-Length: {len(FILTER)}\r\n\r\n".encode(), 1
    )
    for path in [b"/extender/filter", b"/extender/filter?x=1"]:
        with Wire(port) as wire:
            response = wire.send(request.replace(b"/extender/filter", path, 1)).response()
            assert wire.closed_after() == b""
        assert response.status == 400 and response.body == b"Invalid HTTP request received."


@pytest.mark.parametrize(
    "content_types",
    [("text/plain", "application/json"), ("application/json", "text/plain")],
)
def test_a_repeated_content_type_gets_the_asgi_answer(port, content_types):
    first, second = content_types
    request = post("/extender/filter", FILTER, content_type=first).replace(
        b"\r\n\r\n", f"\r\nContent-Type: {second}\r\n\r\n".encode(), 1
    )
    direct = exchange(port, request)
    asgi = exchange(port, request.replace(b"/extender/filter", b"/extender/filter?x=1", 1))
    assert direct.comparable() == asgi.comparable()
    assert direct.status == (415 if first == "text/plain" else 200), direct.body


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/jsonx", "application/x-www-form-urlencoded"]
)
def test_a_body_that_is_not_json_is_a_415(port, content_type):
    response = exchange(port, post("/extender/filter", FILTER, content_type=content_type))
    assert response.status == 415
    assert response.json() == {"Error": "Content-Type must be application/json"}


def test_json_with_parameters_and_any_case_takes_the_direct_path_with_the_same_answer(port):
    content_type = "Application/JSON; charset=utf-8"
    direct = exchange(port, post("/extender/filter", FILTER, content_type=content_type))
    asgi = exchange(port, post("/extender/filter?x=1", FILTER, content_type=content_type))
    assert direct.comparable() == asgi.comparable() and direct.status == 200


def test_a_body_over_the_inline_limit_is_answered_by_the_offload_pool(port):
    body = args_body(go_pod("abc"), MANY_NAMES)
    assert INLINE < len(body) <= MAX_BODY
    response = exchange(port, post("/extender/filter", body))
    assert response.status == 200, response.body
    assert response.json()["NodeNames"] == MANY_NAMES
    assert response.headers["x-schedweb-policy"] == POLICY_HEADER


def test_a_body_over_the_limit_is_a_413(port):
    body = args_body(go_pod("abc"), [f"node-{i:05d}" for i in range(1500)])
    assert len(body) > MAX_BODY
    response = exchange(port, post("/extender/filter", body))
    assert response.status == 413
    assert response.json()["detail"] == f"the body is larger; the limit is {MAX_BODY} bytes"


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_another_method_on_a_verb_is_a_405_with_allow_post(port, method):
    request = post("/extender/filter", FILTER).replace(b"POST", method.encode(), 1)
    response = exchange(port, request)
    assert response.status == 405 and response.headers["allow"] == "POST"
    assert response.headers["content-type"] == "application/json"


def test_an_http_1_0_request_is_answered_and_closed(port):
    with Wire(port) as wire:
        response = wire.send(post("/extender/filter", FILTER, version="HTTP/1.0")).response()
        assert wire.closed_after() == b""
    assert response.status == 200 and response.json()["NodeNames"] == NAMES
    assert response.headers["x-schedweb-policy"] == POLICY_HEADER
    assert response.headers["connection"] == "close"


def test_expect_100_continue_gets_the_interim_answer_then_the_same_answer(port):
    request = post("/extender/filter", FILTER, extra="Expect: 100-continue\r\n")
    head, _, body = request.partition(b"\r\n\r\n")
    with Wire(port) as wire:
        interim = wire.send(head + b"\r\n\r\n").response()
        assert interim.status == 100
        response = wire.send(body).response()
    assert response.comparable() == exchange(port, post("/extender/filter", FILTER)).comparable()


def test_other_paths_near_the_verbs_are_json_404s(port):
    for path in ["/extender/filter/", "/extender/Filter", "/extender/filterx", "/extender//filter"]:
        response = exchange(port, post(path, FILTER))
        assert response.status == 404, path
        assert response.json()["error"] == "not_found"


# --- 6. a request in several segments --------------------------------------------------------


def test_a_request_in_several_segments_is_answered_once(port):
    request = post("/extender/filter", FILTER)
    head_end = request.index(b"\r\n\r\n") + 4
    cuts = [0, 9, 30, head_end - 1, head_end, head_end + 7, head_end + 300, len(request)]
    with Wire(port) as wire:
        wire.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for start, end in itertools.pairwise(cuts):
            wire.sock.sendall(request[start:end])
        response = wire.response()
        # exactly one answer: the next bytes on the connection answer the next request
        follow_up = wire.send(get("/healthz")).response()
        assert wire.buffer == b""
    assert response.comparable() == exchange(port, request).comparable()
    assert follow_up.json() == {"status": "ok"}


def test_a_body_arriving_byte_by_byte_is_answered_once(port):
    request = post("/extender/prioritize", PRIORITIZE)
    with Wire(port) as wire:
        wire.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(0, len(request), 41):
            wire.sock.sendall(request[i : i + 41])
        response = wire.response()
        follow_up = wire.send(get("/healthz")).response()
        assert wire.buffer == b""
    assert response.comparable() == exchange(port, request).comparable()
    assert follow_up.status == 200


# --- 7. the direct path really is taken ------------------------------------------------------


class _Transport(asyncio.Transport):
    """Captures what the protocol writes (a stand-in for pure protocol logic only)."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        assert not self.closing, "a write after close"
        self.written.append(bytes(data))

    def close(self) -> None:
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name, default=None):
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8443)}.get(
            name, default
        )

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class _Protocol:
    """An ExtenderHttpProtocol on a fake transport, its ASGI application recording calls."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        from uvicorn.config import Config
        from uvicorn.server import ServerState

        from schedweb.extender_http import ExtenderHttpProtocol

        self.asgi_calls: list[str] = []

        async def app(scope, receive, send):
            self.asgi_calls.append(scope["path"])
            await send({"type": "http.response.start", "status": 418, "headers": []})
            await send({"type": "http.response.body", "body": b""})

        config = Config(app=app, lifespan="off", proxy_headers=False, timeout_keep_alive=30)
        self.state = ServerState()
        self.protocol = ExtenderHttpProtocol(config, self.state, {}, _loop=loop)
        self.transport = _Transport()
        self.protocol.connection_made(self.transport)

    def writes(self) -> list[bytes]:
        written, self.transport.written = self.transport.written, []
        return written


@pytest.fixture
def protocol(monkeypatch, publish):  # noqa: F811  (the imported fixture)
    from schedweb import asgi

    publish((EXAMPLES / f"{POLICY}.yaml").read_text())  # builds this process's runtime
    monkeypatch.setattr(asgi, "_ready", True)
    loop = asyncio.new_event_loop()
    try:
        yield _Protocol(loop)
    finally:
        loop.close()


def _expected(verb: str, body: bytes) -> bytes:
    """The whole response the direct path must write, from the services' own answer."""
    from policies.extender.runtime import runtime

    answer = getattr(runtime().extender, verb)(body)
    return (
        f"content-type: application/json\r\ncontent-length: {len(answer.body)}\r\n"
        f"x-schedweb-policy: {answer.policy}\r\n\r\n"
    ).encode() + answer.body


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("verb", "body"), [("filter", FILTER), ("prioritize", PRIORITIZE), ("preempt", PREEMPT)]
)
def test_a_verb_is_answered_from_the_parser_in_one_write_without_the_asgi_app(protocol, verb, body):
    request = post(f"/extender/{verb}", body)
    protocol.protocol.data_received(request[:50])
    protocol.protocol.data_received(request[50:])
    written = protocol.writes()
    assert len(written) == 1  # headers and body in one write
    assert written[0].startswith(b"HTTP/1.1 200 OK\r\n") and written[0].endswith(
        _expected(verb, body)
    )
    assert (
        protocol.asgi_calls == [] and not protocol.state.tasks and protocol.protocol.cycle is None
    )
    assert protocol.state.total_requests == 1 and not protocol.transport.closing


@pytest.mark.django_db
def test_what_an_answer_replaced_is_freed_after_its_write(protocol, monkeypatch):
    """The direct path writes the answer, then calls after_answer (deallocation off the time
    kube-scheduler waits), once per answered verb."""
    from schedweb import asgi

    events: list[str] = []
    real = asgi.entry.after_answer
    monkeypatch.setattr(
        asgi.entry,
        "after_answer",
        lambda: (events.append(f"after {len(protocol.transport.written)} writes"), real()),
    )
    for verb in ("filter", "prioritize"):
        protocol.protocol.data_received(post(f"/extender/{verb}", FILTER))
    assert events == ["after 1 writes", "after 2 writes"]
    from policies.extender.runtime import runtime

    assert runtime().extender._replaced == [] and runtime().extender.shared.evicted == []


@pytest.mark.django_db
def test_the_asgi_trap_is_live_for_what_the_direct_path_leaves(protocol):
    async def scenario():
        for request in [
            post("/extender/filter?x=1", FILTER),
            post("/extender/filter", FILTER, version="HTTP/1.0"),
        ]:
            protocol.protocol.data_received(request)
            while protocol.state.tasks:
                await asyncio.gather(*protocol.state.tasks)

    protocol.protocol.loop.run_until_complete(scenario())
    assert protocol.asgi_calls == ["/extender/filter", "/extender/filter"]


@pytest.mark.django_db
def test_pipelined_direct_requests_leave_one_keep_alive_timer(protocol):
    """Each direct answer arms uvicorn's keep-alive timer; several answered in one read must not
    leave an earlier timer armed, or it closes the connection 30 s later mid-use."""
    loop = protocol.protocol.loop
    handles = []
    call_later = loop.call_later

    def recording(delay, callback, *args, **kwargs):
        handle = call_later(delay, callback, *args, **kwargs)
        if getattr(callback, "__name__", "") == "timeout_keep_alive_handler":
            handles.append(handle)
        return handle

    loop.call_later = recording  # on this loop instance only
    protocol.protocol.data_received(post("/extender/filter", FILTER) * 3)
    assert len(protocol.writes()) == 3
    live = [h for h in handles if not h.cancelled()]
    assert live == [protocol.protocol.timeout_keep_alive_task], (len(handles), len(live))
    protocol.protocol.data_received(post("/extender/prioritize", PRIORITIZE)[:20])
    assert all(h.cancelled() for h in handles)  # a new request: no keep-alive deadline left


@pytest.mark.django_db
def test_no_keep_alive_timer_while_a_request_pipelined_behind_a_direct_one_runs(protocol):
    """uvicorn arms the keep-alive timer only when no request is pending; a direct answer arms it
    in the middle of a read, and the ASGI request parsed next in that read must not run under it
    (it would close the connection 30 s later, mid-answer, if the application took that long)."""
    proto = protocol.protocol

    async def scenario():
        proto.data_received(post("/extender/filter", FILTER) + post("/extender/filter?x=1", FILTER))
        assert len(protocol.writes()) == 1  # the direct answer; the ASGI one is pending
        assert proto.timeout_keep_alive_task is None
        while protocol.state.tasks:
            await asyncio.gather(*protocol.state.tasks)
        assert proto.timeout_keep_alive_task is not None  # idle again: the timer is back

    proto.loop.run_until_complete(scenario())
    assert protocol.asgi_calls == ["/extender/filter"]


@pytest.mark.django_db
def test_before_the_runtime_is_built_a_verb_takes_the_asgi_path(protocol, monkeypatch):
    from schedweb import asgi

    monkeypatch.setattr(asgi, "_ready", False)  # a request that beat the lifespan start

    async def scenario():
        protocol.protocol.data_received(post("/extender/filter", FILTER))
        while protocol.state.tasks:
            await asyncio.gather(*protocol.state.tasks)

    protocol.protocol.loop.run_until_complete(scenario())
    assert protocol.asgi_calls == ["/extender/filter"]


@pytest.mark.django_db
def test_a_service_that_raises_is_a_json_500_and_the_connection_stays_usable(protocol, monkeypatch):
    from schedweb import asgi

    def broken(verb, body):
        raise RuntimeError("a bug in the services")

    monkeypatch.setattr(asgi.entry, "extender_answer_or_wait", broken)
    protocol.protocol.data_received(post("/extender/filter", FILTER))
    (written,) = protocol.writes()
    assert written.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
    assert written.endswith(
        b'content-type: application/json\r\ncontent-length: 27\r\n\r\n{"Error": "internal error"}'
    )
    monkeypatch.undo()
    monkeypatch.setattr(asgi, "_ready", True)
    protocol.protocol.data_received(post("/extender/prioritize", PRIORITIZE))
    (written,) = protocol.writes()
    assert written.endswith(_expected("prioritize", PRIORITIZE))
    assert protocol.asgi_calls == [] and not protocol.transport.closing


@pytest.mark.django_db
def test_a_body_stalled_while_its_client_reads_no_answers_still_meets_the_body_deadline(protocol):
    """Reading paused because the answers pile up unread is the client's time, not the
    application's: the body deadline of the request behind them still closes the connection."""
    proto = protocol.protocol
    proto.pause_writing()  # what the transport does past its high-water mark
    following = post("/extender/filter", FILTER)
    proto.data_received(post("/extender/filter", FILTER) + following[: len(following) - 100])
    assert len(protocol.writes()) == 1 and proto.flow.read_paused
    assert proto._stage == "body"
    proto._last_body -= proto.body_seconds + 1  # no byte of it for longer than the deadline
    proto._expired()
    assert protocol.transport.closing
    assert protocol.writes() == []  # a request cut in its body gets no answer


@pytest.mark.django_db
def test_reading_resumes_when_the_answers_drain(protocol):
    proto = protocol.protocol
    proto.pause_writing()
    proto.data_received(post("/extender/filter", FILTER))
    assert proto.flow.read_paused
    proto.resume_writing()  # the client read its answers
    assert not proto.flow.read_paused
    proto.data_received(post("/extender/prioritize", PRIORITIZE))
    assert protocol.writes()[-1].endswith(_expected("prioritize", PRIORITIZE))


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/extender/filter", "/extender/filter?x=1"])
def test_a_graceful_shutdown_answers_the_request_being_read_then_closes(protocol, path):
    """uvicorn's shutdown lets the request in progress finish with connection: close, on both
    paths (a kube-scheduler call in flight during a rolling restart is answered, not reset)."""
    proto = protocol.protocol
    request = post(path, FILTER)

    async def scenario():
        proto.data_received(request[:-10])  # the headers and most of the body
        proto.shutdown()
        assert not protocol.transport.closing
        proto.data_received(request[-10:])
        while protocol.state.tasks:
            await asyncio.gather(*protocol.state.tasks)

    proto.loop.run_until_complete(scenario())
    assert protocol.transport.closing
    written = b"".join(protocol.writes())
    if path == "/extender/filter":
        assert protocol.asgi_calls == []
        assert written.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"\r\nconnection: close\r\n" in written
        assert written.endswith(_expected("filter", FILTER).split(b"\r\n\r\n")[1])
    else:  # the trap application's answer, closed the same way
        assert protocol.asgi_calls == ["/extender/filter"]
        assert written.startswith(b"HTTP/1.1 418 ") and b"\r\nconnection: close\r\n" in written


@pytest.mark.django_db
def test_a_graceful_shutdown_closes_an_idle_kept_alive_connection(protocol):
    proto = protocol.protocol
    proto.data_received(post("/extender/filter", FILTER))
    assert len(protocol.writes()) == 1 and not protocol.transport.closing
    proto.shutdown()
    assert protocol.transport.closing
