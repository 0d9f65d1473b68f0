"""Each client certificate has one job on the extender's listener (issue 27).

The listener runs as shipped (`python -m schedweb.extender_server`) with mutual TLS and the
certificates `make run` makes (scripts/extender-certs.sh: kube-scheduler's, kube-apiserver's
webhook client and the probe's, all of one CA). Before, every certificate of the CA could call
every path: the probe's and the API server's could filter and bind, kube-scheduler's could call
the queue webhook."""

from __future__ import annotations

import http.client
import re
import ssl
import time

import orjson
import pytest

from tests.listeners import listeners
from tests.prometheus_text import assert_valid_exposition

from ..extender.conftest import args_body, go_pod

VERBS = ("filter", "prioritize", "preempt", "bind")
ADMISSION = orjson.dumps(
    {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "r1", "object": {"metadata": {"name": "p"}, "spec": {}}},
    }
)


@pytest.fixture(scope="module")
def listener(tmp_path_factory):
    """(port, tls directory) of a mutual-TLS extender listener on 127.0.0.1."""
    with listeners(tmp_path_factory.mktemp("client-certs"), web=False, tls="mtls") as ports:
        yield ports["extender"], ports["tls"]


def _request(listener, cert: str, method: str, path: str, body: bytes = b""):
    """(status, body) of one request presenting DIR/<cert>.crt, on a connection of its own."""
    port, tls = listener
    context = ssl.create_default_context(cafile=str(tls / "ca.crt"))
    context.load_cert_chain(str(tls / f"{cert}.crt"), str(tls / f"{cert}.key"))
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=context)
    try:
        headers = {"Content-Type": "application/json"} if body else {}
        connection.request(method, path, body or None, headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _verb_body(verb: str) -> bytes:
    if verb == "bind":
        return orjson.dumps(
            {"PodName": "abc", "PodNamespace": "default", "PodUID": "u", "Node": "cp-1"}
        )
    return args_body(go_pod("abc"), ["cp-1", "a-small-1"])


@pytest.mark.parametrize("cert", ["probe", "webhook"])
@pytest.mark.parametrize("verb", VERBS)
def test_the_probes_and_the_api_servers_certificates_get_403_on_the_verbs(listener, cert, verb):
    status, body = _request(listener, cert, "POST", f"/extender/{verb}", _verb_body(verb))
    assert status == 403, body
    assert orjson.loads(body)["error"] == "forbidden"


@pytest.mark.parametrize("cert", ["probe", "client"])
def test_only_the_api_servers_certificate_may_call_the_queue_webhook(listener, cert):
    status, body = _request(listener, cert, "POST", "/admission/queue", ADMISSION)
    assert status == 403, body
    status, body = _request(listener, "webhook", "POST", "/admission/queue", ADMISSION)
    assert status == 200, body
    assert orjson.loads(body)["response"]["uid"] == "r1"


@pytest.mark.parametrize("verb", VERBS)
def test_kube_schedulers_certificate_calls_the_verbs(listener, verb):
    status, body = _request(listener, "client", "POST", f"/extender/{verb}", _verb_body(verb))
    assert status == 200, body


@pytest.mark.parametrize("cert", ["probe", "client", "webhook"])
@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_every_certificate_of_the_ca_reads_health(listener, cert, path):
    status, _body = _request(listener, cert, "GET", path)
    assert status == 200


def test_refusals_are_counted_by_path_and_client(listener):
    def refused() -> dict[tuple[str, str], float]:
        _status, body = _request(listener, "probe", "GET", "/metrics")
        text = body.decode()
        assert_valid_exposition(text)
        return {
            (path, client): float(value)
            for path, client, value in re.findall(
                r'^schedweb_extender_refused_total\{path="(\w+)",client="(\w+)"\} (\S+)$',
                text,
                re.M,
            )
        }

    before = refused()
    _request(listener, "probe", "POST", "/extender/filter", _verb_body("filter"))
    _request(listener, "webhook", "POST", "/extender/bind", _verb_body("bind"))
    _request(listener, "client", "POST", "/admission/queue", ADMISSION)
    after = refused()
    # one worker process: the one answering /metrics counted them, in its memory
    assert after.get(("scheduler", "other"), 0) == before.get(("scheduler", "other"), 0) + 1
    assert after.get(("scheduler", "webhook"), 0) == before.get(("scheduler", "webhook"), 0) + 1
    assert after.get(("webhook", "scheduler"), 0) == before.get(("webhook", "scheduler"), 0) + 1


def _tls_socket(listener, cert: str):
    import socket

    port, tls = listener
    context = ssl.create_default_context(cafile=str(tls / "ca.crt"))
    context.load_cert_chain(str(tls / f"{cert}.crt"), str(tls / f"{cert}.key"))
    raw = socket.create_connection(("127.0.0.1", port), timeout=30)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def _large_headers(length: int) -> bytes:
    return (
        "POST /extender/filter HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\nExpect: 100-continue\r\n\r\n"
    ).encode()


def _first_answer(sock) -> bytes:
    seen = b""
    while b"\r\n\r\n" not in seen:
        chunk = sock.recv(65536)
        assert chunk, seen
        seen += chunk
    return seen


def test_a_large_body_forks_a_child_only_for_kube_schedulers_certificate(listener):
    """Issue 28: a child is forked for a large body at its headers (it shares the listener's
    memory, and the fork holds the listener's loop for milliseconds): a client whose certificate
    may not call the verbs gets its 403 there, before any child, however large it says the body
    is; kube-scheduler's gets the 100 Continue with a child waiting for its body."""
    from ..extender.test_offload import _forked, _listener_pid

    server = _listener_pid(listener[0])
    length = 60 * 1024 * 1024  # what it claims, never sent
    with _tls_socket(listener, "probe") as sock:
        sock.sendall(_large_headers(length))
        answer = _first_answer(sock)
        assert answer.startswith(b"HTTP/1.1 403 "), answer[:200]
        assert _forked(server) == set()
    with _tls_socket(listener, "client") as sock:
        sock.sendall(_large_headers(length))
        answer = _first_answer(sock)
        assert answer.startswith(b"HTTP/1.1 100 "), answer[:200]
        assert len(_forked(server)) == 1  # forked before the 100 Continue was sent


@pytest.mark.parametrize(
    "body",
    [
        b"{" + b'"x": "' + b"y" * 200_000 + b'"',  # cut short: not JSON
        b"[" * 150_000 + b"]" * 150_000,  # nesting orjson refuses
        b'{"Pod": ' + orjson.dumps({"metadata": {"name": "p" * 300_000}}) + b"}",  # no spec
    ],
    ids=["truncated", "deep", "huge-name"],
)
def test_a_hostile_large_body_gets_a_400_from_its_child_and_the_listener_serves_on(listener, body):
    from ..extender.test_offload import _forked, _listener_pid

    status, answer = _request(listener, "client", "POST", "/extender/filter", body)
    assert status == 400, answer[:300]
    assert orjson.loads(answer)["error"]
    status, _answer = _request(listener, "client", "POST", "/extender/filter", _verb_body("filter"))
    assert status == 200
    server = _listener_pid(listener[0])
    deadline = time.monotonic() + 30
    while _forked(server):  # each child reaped once its body is answered
        assert time.monotonic() < deadline, _forked(server)
        time.sleep(0.05)
