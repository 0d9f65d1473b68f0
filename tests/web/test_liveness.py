"""The worker's and beat's liveness probes (schedweb/liveness.py): each process touches its
heartbeat file from its own loop, and `python -m schedweb.liveness FILE MAX_AGE` fails once the
loop stops (the process frozen with SIGSTOP, as a hung loop would be) and passes again when it
goes on. Real Celery processes on a private Redis; waits are for conditions, never for a time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from schedweb.liveness import stale_reason
from tests.e2e.stack import RedisServer
from tests.harness.processes import ManagedProcess
from tests.listeners import ROOT, VENV_BIN, listener_env

MAX_AGE = 5.0  # the probe's limit here; the processes touch their file every second
WAIT = 120.0


def _probe(path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "schedweb.liveness", str(path), str(MAX_AGE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _wait(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {WAIT:.0f} s: {what}")
        time.sleep(0.2)


COMMANDS = {
    "worker": [
        "worker",
        "--loglevel=INFO",
        "--concurrency=1",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ],
    "beat": ["beat", "--loglevel=INFO", "--scheduler", "schedweb.celery:BeatScheduler"],
}


@pytest.mark.parametrize("role", sorted(COMMANDS))
def test_the_probe_fails_while_the_loop_is_stopped_and_passes_when_it_goes_on(tmp_path, role):
    redis = RedisServer(tmp_path / "redis").start()
    alive = tmp_path / "alive"
    extra = ["--schedule", str(tmp_path / "beat-schedule")] if role == "beat" else []
    process = ManagedProcess(
        name=f"celery-{role}",
        argv=[VENV_BIN / "celery", "-A", "schedweb", *COMMANDS[role], *extra],
        log_path=tmp_path / f"{role}.log",
        env=listener_env(
            tmp_path,
            redis_url=redis.url,
            SCHEDWEB_LIVENESS_FILE=str(alive),
            SCHEDWEB_LIVENESS_SECONDS="1",
        ),
        cwd=ROOT,
    )
    missing = _probe(alive)
    assert missing.returncode == 1 and "not started yet" in missing.stderr
    process.start()
    try:
        _wait(lambda: stale_reason(alive, MAX_AGE) == "", f"{role} touches {alive}")
        assert _probe(alive).returncode == 0
        os.kill(process.pid, signal.SIGSTOP)  # the loop stops; the process is still there
        try:
            _wait(lambda: stale_reason(alive, MAX_AGE) != "", "the heartbeat ages")
            stale = _probe(alive)
            assert stale.returncode == 1 and "the loop is stuck" in stale.stderr
        finally:
            os.kill(process.pid, signal.SIGCONT)
        _wait(lambda: stale_reason(alive, MAX_AGE) == "", f"{role} touches {alive} again")
        assert process.exit_code() is None
    finally:
        process.stop(grace=10)
        redis.stop()


def test_without_a_file_the_probe_says_how_to_call_it():
    done = subprocess.run(
        [sys.executable, "-m", "schedweb.liveness"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "usage" in done.stderr
