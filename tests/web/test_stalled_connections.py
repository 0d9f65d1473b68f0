"""Both listeners, as real servers on 127.0.0.1, close connections whose client stalls before or
in its headers or in its body (schedweb/http_timeouts.py), and do not cut a slow request that
keeps coming; stalled connections do not keep a normal request from being answered.

The timeouts are 2 s here (SCHEDWEB_HEADER_TIMEOUT_SECONDS, SCHEDWEB_BODY_TIMEOUT_SECONDS); a
test waits for the server to close the socket, with a socket timeout well past them as the
failure, never for a fixed time. A test whose claim is that something happens before a stalled
connection is cut uses servers whose deadlines no test outlives, never a race with the 2 s.
"""

from __future__ import annotations

import socket
import ssl
import time

import orjson
import pytest

from tests.listeners import connect, listeners, read_until_closed

TIMEOUT = 2.0
LATE = 60.0  # a socket still open this long after connecting was never closed by the server
TIMEOUTS = {
    "SCHEDWEB_HEADER_TIMEOUT_SECONDS": str(TIMEOUT),
    "SCHEDWEB_BODY_TIMEOUT_SECONDS": str(TIMEOUT),
}
PATIENT = {name: "600" for name in TIMEOUTS}  # deadlines far past any test's end
BODY = orjson.dumps(
    {
        "Pod": {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {}},
        "NodeNames": ["cp-1"],
    }
)


def _listeners(workdir, timeouts: dict[str, str]):
    """{"extender": port, "web": port}, each with the header and body `timeouts`."""
    with listeners(workdir, **timeouts) as ports:
        yield ports


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """{"extender": port, "web": port}, each with 2 s header and body timeouts."""
    yield from _listeners(tmp_path_factory.mktemp("stalls"), TIMEOUTS)


@pytest.fixture(scope="module")
def patient_servers(tmp_path_factory):
    """The same listeners with deadlines no test outlives: a stalled connection stays open."""
    yield from _listeners(tmp_path_factory.mktemp("patient"), PATIENT)


def request_head(path: str, *, length: int, content_type: str = "application/json") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


PATHS = {"extender": "/extender/filter", "web": "/healthz"}
# What a complete POST gets: the extender's filter answer; Django reads the whole body before
# its middleware runs, and CSRF then refuses an anonymous POST: an answer, not a cut connection.
ANSWERS = {"extender": b"HTTP/1.1 200 ", "web": b"HTTP/1.1 403 "}


def closed_after(sock: socket.socket, started: float) -> tuple[float, bytes]:
    """Seconds from `started` until the server closed `sock`, and what it sent before."""
    received = read_until_closed(sock)
    return time.monotonic() - started, received


@pytest.mark.parametrize("listener", ["extender", "web"])
@pytest.mark.parametrize(
    ("stall", "sent"),
    [
        ("before sending anything", b""),
        (
            "halfway through the headers",
            b"POST /extender/filter HTTP/1.1\r\nHost: 127.0.0.1\r\nCont",
        ),
        ("after the request line", b"GET /healthz HTTP/1.1\r\n"),
    ],
)
def test_a_client_that_stalls_before_its_headers_end_gets_408_and_is_disconnected(
    servers, listener, stall, sent
):
    started = time.monotonic()
    with connect(servers[listener], sent, timeout=LATE) as sock:
        seconds, received = closed_after(sock, started)
    assert received.startswith(b"HTTP/1.1 408 "), (stall, received[:80])
    assert TIMEOUT * 0.9 <= seconds < LATE, (stall, seconds)


@pytest.mark.parametrize("listener", ["extender", "web"])
def test_a_client_that_stalls_in_its_body_is_disconnected_without_an_answer(servers, listener):
    head = request_head(PATHS[listener], length=len(BODY))
    started = time.monotonic()
    with connect(servers[listener], head + BODY[:10], timeout=LATE) as sock:
        seconds, received = closed_after(sock, started)
    assert received == b"", received[:80]  # the request was never complete: nothing to answer
    assert TIMEOUT * 0.9 <= seconds < LATE, seconds


@pytest.mark.parametrize("listener", ["extender", "web"])
def test_a_slow_body_that_keeps_coming_is_answered(servers, listener):
    # 8 pieces 0.5 s apart: 3.5 s for the body, longer than the 2 s timeout, never 2 s idle.
    pieces = [BODY[i : i + len(BODY) // 8 + 1] for i in range(0, len(BODY), len(BODY) // 8 + 1)]
    with connect(servers[listener], request_head(PATHS[listener], length=len(BODY))) as sock:
        started = time.monotonic()
        for piece in pieces:
            time.sleep(0.5)  # the pace of a slow client, not a wait for the server
            sock.sendall(piece)
        assert time.monotonic() - started > TIMEOUT
        sock.settimeout(LATE)
        answer = sock.recv(65536)
    assert answer.startswith(ANSWERS[listener]), answer[:200]


def _whole_response(sock) -> bytes:
    """One response, headers and Content-Length body, however the segments arrive."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, data
        body += chunk
    return head + b"\r\n\r\n" + body


def test_a_kept_alive_connection_gets_the_header_deadline_again_for_its_next_request(servers):
    port = servers["extender"]
    with connect(port, request_head("/extender/filter", length=len(BODY)) + BODY) as sock:
        assert _whole_response(sock).startswith(b"HTTP/1.1 200 ")
        sock.sendall(b"POST /extender/filter HTTP/1.1\r\nHost: 12")  # then nothing
        started = time.monotonic()
        sock.settimeout(LATE)
        seconds, received = closed_after(sock, started)
    assert received.startswith(b"HTTP/1.1 408 ") and seconds < LATE


def stalled_connections(port: int, path: str) -> list[socket.socket]:
    """150 connections stalled in turn before sending anything, in the headers, in the body."""
    head = request_head(path, length=len(BODY))
    return [
        connect(port, (b"", head[:20], head + BODY[:5])[i % 3], timeout=LATE) for i in range(150)
    ]


def still_open(sock: socket.socket) -> bool:
    """The server has neither closed `sock` nor sent anything on it."""
    sock.setblocking(False)
    try:
        sock.recv(1)
    except BlockingIOError:
        return True
    except ConnectionResetError:
        return False
    finally:
        sock.setblocking(True)
    return False


@pytest.mark.parametrize("listener", ["extender", "web"])
def test_many_stalled_connections_do_not_keep_a_normal_request_from_an_answer(
    patient_servers, listener
):
    # Their deadlines are minutes away: an answer that waited for them to be cut never comes.
    port = patient_servers[listener]
    stalled = []
    try:
        stalled = stalled_connections(port, PATHS[listener])
        head = request_head(PATHS[listener], length=len(BODY))
        with connect(port, head + BODY, timeout=LATE) as sock:
            answer = sock.recv(65536)
        assert answer.startswith(ANSWERS[listener]), answer[:200]
        # answered before any stalled one was closed, not by closing some to make room
        assert all(still_open(sock) for sock in stalled)
    finally:
        for sock in stalled:
            sock.close()


@pytest.mark.parametrize("listener", ["extender", "web"])
def test_many_stalled_connections_are_each_closed_in_their_turn(servers, listener):
    stalled = []
    try:
        stalled = stalled_connections(servers[listener], PATHS[listener])
        for i, sock in enumerate(stalled):
            received = read_until_closed(sock)
            if i % 3 < 2:  # its headers never ended
                assert received.startswith(b"HTTP/1.1 408 "), (i, received[:80])
            else:  # cut in its body: the request was never complete, nothing to answer
                assert received == b"", (i, received[:80])
    finally:
        for sock in stalled:
            sock.close()


def test_a_client_that_stalls_in_the_tls_handshake_is_disconnected(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("stalls-tls")
    with listeners(workdir, web=False, tls="tls", **TIMEOUTS) as ports:
        port, tls = ports["extender"], ports["tls"]
        started = time.monotonic()
        with connect(port, b"\x16\x03\x01", timeout=LATE) as sock:  # a ClientHello's first bytes
            seconds, _ = closed_after(sock, started)
        assert TIMEOUT * 0.9 <= seconds < LATE, seconds  # asyncio's default would be 60 s
        # and a real client still gets through
        context = ssl.create_default_context(cafile=str(tls / "ca.crt"))
        raw = socket.create_connection(("127.0.0.1", port), timeout=LATE)
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
