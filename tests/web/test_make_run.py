"""`make run` as the README promises it: pages and the extender's TLS listener come up, and Ctrl-C
stops everything it started, the Redis it started included.

scripts/run.sh runs for real (its own ports and SQLite file; the checkout's .run/ for the secret
key and the local CA, as on a developer's machine), in its own process group so the test can send
the terminal's Ctrl-C (SIGINT to the group).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.harness.processes import free_ports

ROOT = Path(__file__).resolve().parents[2]


def _open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _get(url: str, context: ssl.SSLContext | None = None) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as response:
            return response.status
    except OSError:
        return 0


def _until(condition, *, timeout: float, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"make run exited ({proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"make run: no {what} within {timeout:.0f} s")
        time.sleep(0.2)


@pytest.mark.slow
def test_make_run_serves_and_ctrl_c_stops_everything_it_started(tmp_path):
    web, extender, redis = free_ports(count=3)
    env = {
        **os.environ,
        "SCHEDWEB_WEB_PORT": str(web),
        "SCHEDWEB_EXTENDER_PORT": str(extender),
        "SCHEDWEB_REDIS_URL": f"redis://127.0.0.1:{redis}/0",
        "SCHEDWEB_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    # as a developer's shell has it: the product's own settings, not the test suite's
    for name in (
        "SCHEDWEB_KUBECONFIG",
        "SCHEDWEB_EXTENDER_URL",
        "SCHEDWEB_DEBUG",
        "DJANGO_SETTINGS_MODULE",
    ):
        env.pop(name, None)
    log = (tmp_path / "run.log").open("w")
    proc = subprocess.Popen(
        ["scripts/run.sh"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _until(
            lambda: _get(f"http://127.0.0.1:{web}/healthz") == 200,
            timeout=240,
            what="pages on its web port",
            proc=proc,
        )
        tls = ssl.create_default_context(cafile=str(ROOT / ".run/tls/ca.crt"))
        tls.load_cert_chain(ROOT / ".run/tls/client.crt", ROOT / ".run/tls/client.key")
        _until(
            lambda: _get(f"https://127.0.0.1:{extender}/healthz", tls) == 200,
            timeout=60,
            what="the extender's TLS listener",
            proc=proc,
        )
        assert _open(redis)
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        log.close()
    try:
        for port, what in ((web, "web"), (extender, "extender"), (redis, "the Redis it started")):
            deadline = time.monotonic() + 10
            while _open(port) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not _open(port), (
                f"{what} still listens on {port} after Ctrl-C:\n"
                + (tmp_path / "run.log").read_text()[-2000:]
            )
    finally:  # leave no Redis behind, whatever happened
        subprocess.run(["scripts/services.sh", "stop-redis", str(redis)], cwd=ROOT, check=False)
        shutil.rmtree(ROOT / ".run" / f"redis-{redis}", ignore_errors=True)
