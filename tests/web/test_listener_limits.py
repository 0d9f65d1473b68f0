"""Both listeners, as real servers on 127.0.0.1 (schedweb/http_timeouts.py), issue 27: a body that
keeps dripping is cut off at the whole body's deadline, each process keeps at most
SCHEDWEB_MAX_CONNECTIONS connections, and a request with two Host headers is a 400.

The deadline here is 4 s and the gap between body reads may be 600 s, so only the whole body's
deadline can close the dripping connection; a test waits for the server to close its socket,
with a socket timeout well past the deadline as the failure, never for a fixed time."""

from __future__ import annotations

import socket
import ssl
import time

import pytest

from tests.listeners import connect, listeners, read_until_closed

DEADLINE = 4.0
LATE = 60.0
CAP = 6
LIMITS = {
    "SCHEDWEB_HEADER_TIMEOUT_SECONDS": "600",
    "SCHEDWEB_BODY_TIMEOUT_SECONDS": "600",
    "SCHEDWEB_BODY_DEADLINE_SECONDS": str(DEADLINE),
    "SCHEDWEB_MAX_CONNECTIONS": str(CAP),
}
PATHS = {"extender": "/extender/filter", "web": "/api/v1/validate"}


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """{"extender": port, "web": port} with LIMITS."""
    with listeners(tmp_path_factory.mktemp("limits"), **LIMITS) as ports:
        yield ports


@pytest.mark.parametrize("listener", ["extender", "web"])
def test_a_body_dripped_a_byte_at_a_time_is_cut_off_at_the_whole_body_deadline(servers, listener):
    head = (
        f"POST {PATHS[listener]} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    ).encode()
    with connect(servers[listener], head, timeout=LATE) as sock:
        started = time.monotonic()
        sock.settimeout(0.5)  # one byte each half second: never idle for long
        received = b""
        while time.monotonic() - started < LATE:
            try:
                sock.sendall(b" ")
            except OSError:  # closed by the server
                break
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
        seconds = time.monotonic() - started
    assert received == b"", received[:200]  # never complete: nothing to answer
    assert DEADLINE * 0.9 <= seconds < LATE, seconds


@pytest.mark.parametrize("listener", ["extender", "web"])
@pytest.mark.parametrize(
    "hosts", [("127.0.0.1", "evil.example"), ("evil.example", "127.0.0.1"), ("a", "a")]
)
def test_a_request_with_two_host_headers_is_a_400(servers, listener, hosts):
    request = (
        "GET /healthz HTTP/1.1\r\n" + "".join(f"Host: {host}\r\n" for host in hosts) + "\r\n"
    ).encode()
    with connect(servers[listener], request, timeout=LATE) as sock:
        answer = read_until_closed(sock)  # and the connection is closed
    assert answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert b"at most one Host header" in answer


def _healthz(port: int) -> bytes:
    with connect(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", timeout=LATE) as sock:
        return sock.recv(65536)


@pytest.mark.parametrize("listener", ["extender", "web"])
def test_a_connection_past_the_cap_is_answered_503_and_closed(servers, listener):
    port = servers[listener]
    idle = [connect(port, timeout=LATE) for _ in range(CAP)]
    try:
        # accepted in order: the connection after CAP idle ones is one too many
        with connect(port, timeout=LATE) as sock:
            answer = read_until_closed(sock)
        assert answer.startswith(b"HTTP/1.1 503 "), answer[:200]
        assert b"connection: close" in answer
        idle.pop().close()
        deadline = time.monotonic() + LATE  # until the server has seen that one close
        while not (answer := _healthz(port)).startswith(b"HTTP/1.1 200 "):
            assert answer.startswith(b"HTTP/1.1 503 "), answer[:200]
            assert time.monotonic() < deadline, "the cap was never freed"
            time.sleep(0.05)
    finally:
        for sock in idle:
            sock.close()


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    """(port, tls directory) of a mutual-TLS extender whose pool takes one large body."""
    with listeners(
        tmp_path_factory.mktemp("limits-tls"),
        web=False,
        tls="mtls",
        SCHEDWEB_EXTENDER_OFFLOAD_WORKERS="1",
        SCHEDWEB_EXTENDER_OFFLOAD_QUEUE="0",
    ) as ports:
        yield ports["extender"], ports["tls"]


def _tls_connect(port: int, tls) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(tls / "ca.crt"))
    context.load_cert_chain(str(tls / "client.crt"), str(tls / "client.key"))
    raw = socket.create_connection(("127.0.0.1", port), timeout=LATE)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def test_a_refused_large_body_is_not_read_to_its_end_under_tls(tls_server):
    """A 503 at the headers of a 60 MB body: a graceful TLS close would read (and decrypt) all
    60 MB while waiting for the client's close_notify; the listener ends the connection
    instead, so a client that goes on sending is cut off long before the end."""
    port, tls = tls_server
    size = 60_000_000
    head = (
        "POST /extender/filter HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {size}\r\n\r\n"
    ).encode()
    with _tls_connect(port, tls) as holder:
        holder.sendall(head)  # takes the pool's one place, its body never comes
        with _tls_connect(port, tls) as sock:
            sock.sendall(head)
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = sock.recv(65536)
                assert chunk, answer
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 503 "), answer[:200]
            sent = 0
            piece = b" " * 65536
            with pytest.raises(OSError):  # reset (or its TLS form) while still sending
                while sent < size:
                    sock.sendall(piece)
                    sent += len(piece)
            assert sent < size // 2, sent
