"""The extender's metrics for Prometheus (schedweb/metrics_proxy.py): a real listener over
mutual TLS and the proxy beside it, as the chart's extender pod runs them. A bearer token gets
the listener's own /metrics; no token, a wrong one, another path or method get nothing of the
extender; off loopback the proxy does not start without a token."""

from __future__ import annotations

import http.client
import subprocess
import sys

import pytest

from tests.e2e.stack import RedisServer
from tests.harness.processes import ManagedProcess, free_ports
from tests.listeners import ROOT, VENV_BIN, listener_env, start_extender

TOKEN = "s3cr3t-scrape-token-0123456789"


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    """(the proxy's port, the extender listener's process)."""
    workdir = tmp_path_factory.mktemp("metrics")
    tls = workdir / "tls"
    subprocess.run([ROOT / "scripts" / "extender-certs.sh", tls], check=True)
    redis = RedisServer(workdir / "redis").start()
    token = workdir / "token"
    token.write_text(TOKEN + "\n")
    extender, port = start_extender(
        workdir,
        redis_url=redis.url,
        ca_file=str(tls / "ca.crt"),
        client=(str(tls / "probe.crt"), str(tls / "probe.key")),
        SCHEDWEB_EXTENDER_TLS_CERT=str(tls / "server.crt"),
        SCHEDWEB_EXTENDER_TLS_KEY=str(tls / "server.key"),
        SCHEDWEB_EXTENDER_CLIENT_CA=str(tls / "ca.crt"),
    )
    proxy, metrics_port = _start_proxy(workdir, extender_port=port, tls=tls, token=token)
    try:
        yield metrics_port, extender
    finally:
        proxy.stop(grace=5)
        extender.stop(grace=5)
        redis.stop()


def _start_proxy(workdir, *, extender_port: int, tls, token) -> tuple[ManagedProcess, int]:
    """`python -m schedweb.metrics_proxy` for the listener at `extender_port`, with the probe's
    client certificate, as the chart's extender pod runs it (on loopback here)."""
    metrics_port = free_ports(count=1)[0]
    proxy = ManagedProcess(
        name="metrics-proxy",
        argv=[VENV_BIN / "python", "-m", "schedweb.metrics_proxy"],
        log_path=workdir / f"metrics-{metrics_port}.log",
        env=listener_env(
            workdir,
            redis_url="redis://127.0.0.1:1/0",  # the proxy reads no setting of Django's
            SCHEDWEB_METRICS_PORT=str(metrics_port),
            SCHEDWEB_METRICS_TOKEN_FILE=str(token),
            SCHEDWEB_EXTENDER_PORT=str(extender_port),
            SCHEDWEB_PROBE_HOST="localhost",
            SCHEDWEB_EXTENDER_CLIENT_CA=str(tls / "ca.crt"),
            SCHEDWEB_PROBE_CERT=str(tls / "probe.crt"),
            SCHEDWEB_PROBE_KEY=str(tls / "probe.key"),
        ),
        cwd=ROOT,
    )
    proxy.start()
    try:
        proxy.wait_ready(
            check=lambda: _get(metrics_port, "/metrics")[0] == 401, timeout=60, what="answers"
        )
    except BaseException:
        proxy.stop(grace=5)
        raise
    return proxy, metrics_port


def _get(port: int, path: str, *, token: str | None = None, method: str = "GET"):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        connection.request(method, path, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_a_scraper_with_the_token_gets_the_listeners_metrics(proxied):
    port, _extender = proxied
    status, body = _get(port, "/metrics", token=TOKEN)
    assert status == 200
    assert "# TYPE schedweb_extender_requests_total counter" in body
    assert "schedweb_extender_redis_up" in body


@pytest.mark.parametrize(
    ("path", "token", "method", "status"),
    [
        ("/metrics", None, "GET", 401),
        ("/metrics", "wrong-token", "GET", 401),
        ("/metrics", TOKEN[:-1], "GET", 401),
        ("/extender/filter", TOKEN, "GET", 404),
        ("/extender/filter", TOKEN, "POST", 405),
        ("/healthz", TOKEN, "GET", 404),
        ("/metrics/../extender/bind", TOKEN, "GET", 404),
    ],
)
def test_nothing_but_metrics_with_the_token_is_answered(proxied, path, token, method, status):
    port, _extender = proxied
    got, body = _get(port, path, token=token, method=method)
    assert got == status
    assert "schedweb_extender" not in body


def test_off_loopback_the_proxy_refuses_to_start_without_a_token(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "schedweb.metrics_proxy"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "SCHEDWEB_METRICS_HOST": "0.0.0.0"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "SCHEDWEB_METRICS_TOKEN_FILE" in done.stderr
    short = tmp_path / "token"
    short.write_text("short")
    done = subprocess.run(
        [sys.executable, "-m", "schedweb.metrics_proxy"],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "SCHEDWEB_METRICS_TOKEN_FILE": str(short)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "at least 16 bytes" in done.stderr


def test_without_the_listener_the_scrape_gets_503(tmp_path):
    tls = tmp_path / "tls"
    subprocess.run([ROOT / "scripts" / "extender-certs.sh", tls], check=True)
    token = tmp_path / "token"
    token.write_text(TOKEN)
    nobody = free_ports(count=1)[0]  # nothing listens there
    proxy, port = _start_proxy(tmp_path, extender_port=nobody, tls=tls, token=token)
    try:
        status, body = _get(port, "/metrics", token=TOKEN)
    finally:
        proxy.stop(grace=5)
    assert status == 503 and "did not answer" in body
