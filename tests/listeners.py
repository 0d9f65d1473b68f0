"""The two listeners as real servers on 127.0.0.1, started as scripts/run.sh starts them (the
extender with `python -m schedweb.extender_server`, the pages and API with uvicorn and schedweb's
protocol), for tests that need sockets: stalled clients, several worker processes."""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.harness.processes import ManagedProcess, free_ports

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


def listener_env(workdir: Path, *, redis_url: str, **extra: str) -> dict[str, str]:
    """The environment of a listener: its own SQLite file and Redis, DEBUG off, plain HTTP."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SCHEDWEB_", "DJANGO_"))
    }
    env.update(
        {
            "SCHEDWEB_SECRET_KEY": "listener-tests",
            "SCHEDWEB_DEBUG": "0",
            "SCHEDWEB_REDIS_URL": redis_url,
            "SCHEDWEB_DATABASE_URL": f"sqlite:///{workdir / 'db.sqlite3'}",
            "SCHEDWEB_CLUSTER_SOURCE": "demo",
        }
    )
    env.update(extra)
    return env


def mtls_settings(tls: Path) -> dict[str, str]:
    """The extender's settings for mutual TLS with the certificates scripts/extender-certs.sh
    made in `tls`."""
    return {
        "SCHEDWEB_EXTENDER_TLS_CERT": str(tls / "server.crt"),
        "SCHEDWEB_EXTENDER_TLS_KEY": str(tls / "server.key"),
        "SCHEDWEB_EXTENDER_CLIENT_CA": str(tls / "ca.crt"),
    }


def _answers_healthz(
    port: int, ca_file: str | None = None, client: tuple[str, str] | None = None
) -> bool:
    if ca_file:
        context = ssl.create_default_context(cafile=ca_file)
        if client:
            context.load_cert_chain(*client)
        connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=2, context=context)
    else:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status == 200
    finally:
        connection.close()


def start_extender(
    workdir: Path,
    *,
    redis_url: str,
    ca_file: str | None = None,
    client: tuple[str, str] | None = None,
    module: str = "schedweb.extender_server",
    **extra: str,
) -> tuple[ManagedProcess, int]:
    """`python -m schedweb.extender_server` (or `module`) on a free port (plain HTTP on loopback,
    or TLS when `extra` names a certificate: `ca_file` then checks it, and `client`, a
    certificate and key, is presented under mutual TLS)."""
    port = free_ports(count=1)[0]
    env = listener_env(workdir, redis_url=redis_url, SCHEDWEB_EXTENDER_PORT=str(port), **extra)
    process = ManagedProcess(
        name="extender",
        argv=[VENV_BIN / "python", "-m", module],
        log_path=workdir / "extender.log",
        env=env,
        cwd=ROOT,
    )
    process.start()
    process.wait_ready(
        check=lambda: _answers_healthz(port, ca_file, client), timeout=60, what="/healthz"
    )
    return process, port


def start_web(workdir: Path, *, redis_url: str, **extra: str) -> tuple[ManagedProcess, int]:
    """uvicorn schedweb.asgi:application on a free port, with the flags of scripts/run.sh."""
    port = free_ports(count=1)[0]
    process = ManagedProcess(
        name="uvicorn",
        argv=[
            VENV_BIN / "uvicorn",
            "schedweb.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--loop",
            "uvloop",
            "--http",
            "schedweb.http_timeouts:TimedHttpToolsProtocol",
            "--lifespan",
            "on",
            "--no-access-log",
        ],
        log_path=workdir / "web.log",
        env=listener_env(workdir, redis_url=redis_url, **extra),
        cwd=ROOT,
    )
    process.start()
    process.wait_ready(check=lambda: _answers_healthz(port), timeout=60, what="/healthz")
    return process, port


def connect(port: int, data: bytes = b"", *, timeout: float = 30.0) -> socket.socket:
    """A raw client socket that has sent `data`."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if data:
        sock.sendall(data)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (socket.timeout if it does
    not within the socket's timeout)."""
    received = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk


@contextlib.contextmanager
def listeners(
    workdir: Path, *, web: bool = True, tls: str = "", **extra: str
) -> Iterator[dict[str, Any]]:
    """A private Redis, the extender's listener (one worker unless `extra` says otherwise) and,
    with `web`, the pages' listener, all with the `extra` settings: {"extender": port, "web":
    port, "tls": directory}. `tls`: "" plain HTTP, "tls" a server certificate of
    scripts/extender-certs.sh, "mtls" its client CA too (ready once the probe's certificate
    reads /healthz)."""
    from tests.e2e.stack import RedisServer

    ports: dict[str, Any] = {"tls": workdir / "tls"}
    certs: dict[str, Any] = {}
    if tls:
        subprocess.run(
            [ROOT / "scripts" / "extender-certs.sh", ports["tls"]], check=True, capture_output=True
        )
        certs = {"ca_file": str(ports["tls"] / "ca.crt"), **mtls_settings(ports["tls"])}
        if tls != "mtls":
            del certs["SCHEDWEB_EXTENDER_CLIENT_CA"]
    if tls == "mtls":
        certs["client"] = (str(ports["tls"] / "probe.crt"), str(ports["tls"] / "probe.key"))
    redis = RedisServer(workdir / "redis").start()
    started = []
    try:
        process, ports["extender"] = start_extender(
            workdir, redis_url=redis.url, **{"SCHEDWEB_EXTENDER_WORKERS": "1", **certs, **extra}
        )
        started.append(process)
        if web:
            process, ports["web"] = start_web(workdir, redis_url=redis.url, **extra)
            started.append(process)
        yield ports
    finally:
        for process in started:
            process.stop(grace=5)
        redis.stop()
