"""Liveness of the Celery worker and beat: a heartbeat file each touches from its own loop, and
`python -m schedweb.liveness FILE MAX_AGE_SECONDS`, the pods' exec probe (exit 0 while the file
is younger than MAX_AGE_SECONDS, 1 otherwise, with the reason on stderr).

A worker whose main loop hangs (a broker call that never returns, a deadlock) stays Running, and
so does the cluster watch it would supervise. Celery's own check, `celery inspect ping`, starts a
client that loads the app (seconds of CPU per probe) and goes through the broker. Instead, with
SCHEDWEB_LIVENESS_FILE set:
- the worker's bootstep (schedweb/celery.py Heartbeat) puts a timer on the worker's event loop, where the consumer
  runs, that touches the file every SCHEDWEB_LIVENESS_SECONDS (10): when that loop stops, the
  file ages;
- beat's scheduler (schedweb/celery.py BeatScheduler) touches it at every tick (at least every 2 s with schedweb's
  schedule, schedweb/celery.py).
A watch task that hangs in a pool process is not the loop's business: its Redis lock lapses after
30 s and beat's supervisor starts another (policies/cluster/sync.py), and the task's time limit
ends it. The probe itself imports nothing but the standard library: no Django start per probe.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

FILE_VARIABLE = "SCHEDWEB_LIVENESS_FILE"
SECONDS_VARIABLE = "SCHEDWEB_LIVENESS_SECONDS"


def heartbeat_file() -> Path | None:
    value = os.environ.get(FILE_VARIABLE, "")
    return Path(value) if value else None


def touch(path: Path | None = None) -> None:
    """Marks the process alive now (nothing without SCHEDWEB_LIVENESS_FILE)."""
    path = path or heartbeat_file()
    if path is not None:
        path.touch()


def stale_reason(path: Path, max_age: float, *, now: float | None = None) -> str:
    """ "" while `path` was touched within `max_age` seconds, else why not."""
    try:
        modified = path.stat().st_mtime
    except OSError as exc:
        return f"{path}: {exc.strerror}: not started yet, or not alive"
    age = (time.time() if now is None else now) - modified
    if age > max_age:
        return f"{path}: last touched {age:.0f} s ago (at most {max_age:g} s): the loop is stuck"
    return ""


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m schedweb.liveness FILE MAX_AGE_SECONDS", file=sys.stderr)
        return 2
    reason = stale_reason(Path(argv[0]), float(argv[1]))
    if reason:
        print(reason, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
