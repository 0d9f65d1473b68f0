"""Extender metrics: counted in process memory on the hot path, exposed from process memory.

Prometheus convention: a target exposes the counters of the processes behind it, from their own
memory, so they survive a Redis flush or restart (before issue 14 they lived in Redis and reset
with it). The extender listener runs several uvicorn workers behind one port, and a scrape reaches
one of them at random, so a per-process exposition with a `pid` label would show a different
process at each scrape. Instead each worker writes its cumulative totals, about once a second
from its background thread, to a small file of its own in a per-listener directory
(SCHEDWEB_METRICS_DIR, emptied by `python -m schedweb.extender_server` at start), and whichever
worker answers `/metrics` adds the other workers' files to its own up-to-date totals: the sum
over the listener's processes, like prometheus_client's multiprocess mode, without putting its
mmap writes and label lookups on the hot path or another dependency in requirements.txt. A
worker that exits leaves its file, so its counts stay in the sum (counters never go down); a
restarted listener starts from zero, which Prometheus reads as a counter reset.

The per-minute buckets behind the dashboard's "requests per second, p99, errors in the last
minutes" are still added to Redis by the same thread (they are cluster-wide and short-lived).

Gauges (issue 24): each worker's file also carries what it serves, the policies' counter and
the snapshot's version with their ages and the snapshot's lag (runtime.ExtenderRuntime.gauges),
and /metrics shows them for every worker whose file is fresh, labelled by pid, so one scrape
shows whether any process is behind.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
from collections import defaultdict
from pathlib import Path

# Upper bounds in seconds; the extender's budget is a few ms (p99 target 10 ms).
BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.05, 0.1, 0.25, 1.0)
MINUTE_KEY = "schedweb:metrics:extender:minute:{minute}"
MINUTE_TTL = 3 * 3600
FILE_PREFIX = "extender-"  # one file per process in SCHEDWEB_METRICS_DIR: extender-<pid>.json
GAUGES = "gauges"  # the file's key for the process's gauges (the others are its totals)


class Metrics:
    """Counters and latency histograms per verb; `observe` is the only hot-path call.

    `observe` adds to a small pending dict under an uncontended lock; `collect` (the background
    thread, or a scrape) moves the pending deltas into the process's cumulative totals and into
    what the next Redis flush sends.
    """

    def __init__(self, *, directory: str | os.PathLike[str] | None = None) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, float] = defaultdict(float)
        self._unsent: dict[str, float] = defaultdict(float)  # for Redis's minute buckets
        self._totals: dict[str, float] = defaultdict(float)
        self._written: dict[str, float] = {}
        self.directory = Path(directory) if directory else None
        self.pid = os.getpid()
        if self.directory is not None:
            # A process that reuses a dead worker's pid continues its counts, never lowers them.
            self._totals.update(_read_file(self._path()))

    def observe(
        self,
        *,
        verb: str,
        code: int,
        seconds: float,
        policy: str = "",
        version: int = 0,
        error: str = "",
    ) -> None:
        """Records one request (a few dict updates; the lock is uncontended in practice)."""
        bucket = next((b for b in BUCKETS if seconds <= b), "+Inf")
        with self._lock:
            pending = self._pending
            pending[f"requests|{verb}|{code}"] += 1
            pending[f"latency_bucket|{verb}|{bucket}"] += 1
            pending[f"latency_sum|{verb}"] += seconds
            pending[f"latency_count|{verb}"] += 1
            if error:
                pending[f"errors|{verb}|{error}"] += 1
            if policy:
                pending[f"decisions|{policy}|{version}|{verb}"] += 1
            else:
                pending[f"passthrough|{verb}"] += 1

    def count(self, kind: str, *labels: str, value: float = 1.0) -> None:
        """Adds to a counter that is not a request's: refusals by client certificate
        (`refused`, path kind and client role) and requeue evictions (`requeue_evicted`)."""
        with self._lock:
            self._pending["|".join((kind, *labels))] += value

    def shadow(self, outcome: str, kinds: list[str], seconds: float) -> None:
        """A shadow judgement (issue 25): its outcome, each kind of difference, and its time."""
        bucket = next((b for b in BUCKETS if seconds <= b), "+Inf")
        with self._lock:
            pending = self._pending
            pending[f"shadow_judged|{outcome}"] += 1
            for kind in kinds:
                pending[f"shadow_differed|{kind}"] += 1
            pending[f"shadow_bucket|{bucket}"] += 1
            pending["shadow_sum"] += seconds

    def shadow_skipped(self) -> None:
        """A pod the shadow did not judge: its share of time was spent (shadow.py)."""
        with self._lock:
            self._pending["shadow_skipped"] += 1

    def catch_up(self, outcome: str, seconds: float) -> None:
        """A request that waited for the snapshot (catch_up.py): caught-up, timed-out, or
        refused (too many waiting)."""
        with self._lock:
            self._pending[f"catch_up|{outcome}"] += 1
            self._pending[f"catch_up_seconds|{outcome}"] += seconds

    def collect(self) -> None:
        """Moves the pending deltas into the totals and into the next Redis flush."""
        with self._lock:
            pending, self._pending = self._pending, defaultdict(float)
            for key, value in pending.items():
                self._totals[key] += value
                self._unsent[key] += value

    def totals(self) -> dict[str, float]:
        """This process's cumulative counts since it started (or since its file's values)."""
        self.collect()
        with self._lock:
            return dict(self._totals)

    def write(self, *, gauges: dict[str, float] | None = None) -> None:
        """Writes this process's totals (and `gauges`) to its file in the metrics directory
        (atomically: a reader sees the old or the new file, never half), when they changed."""
        if self.directory is None:
            return
        content = self.totals()
        if gauges:
            content[GAUGES] = gauges  # type: ignore[assignment]
        if content == self._written:
            return
        path = self._path()
        partial = path.with_name(f".{path.name}.tmp")
        partial.write_bytes(json.dumps(content).encode())
        os.replace(partial, path)
        self._written = content

    def listener_gauges(
        self, own: dict[str, float], *, fresh_seconds: float
    ) -> dict[int, dict[str, float]]:
        """Each worker's gauges by pid: this process's `own`, the others' from files written
        within `fresh_seconds` (a worker that exited is not shown as serving anything)."""
        found: dict[int, dict[str, float]] = {}
        if self.directory is not None:
            now = time.time()
            for path in sorted(self.directory.glob(f"{FILE_PREFIX}*.json")):
                pid = path.stem[len(FILE_PREFIX) :]
                with contextlib.suppress(OSError, ValueError):
                    if not pid.isdigit() or now - path.stat().st_mtime > fresh_seconds:
                        continue
                    data = json.loads(path.read_bytes()).get(GAUGES)
                    if isinstance(data, dict):
                        found[int(pid)] = {
                            str(k): float(v)
                            for k, v in data.items()
                            if isinstance(v, (int, float)) and math.isfinite(v)
                        }
        found[self.pid] = dict(own)
        return found

    def listener_totals(self) -> dict[str, float]:
        """The sum over the listener's processes: the other workers' files plus this process's
        own totals from memory (fresher than its file)."""
        merged: dict[str, float] = defaultdict(float)
        own = self._path() if self.directory is not None else None
        if self.directory is not None:
            for path in sorted(self.directory.glob(f"{FILE_PREFIX}*.json")):
                if path != own:
                    for key, value in _read_file(path).items():
                        merged[key] += value
        for key, value in self.totals().items():
            merged[key] += value
        return dict(merged)

    def flush(self, client) -> None:
        """Adds the deltas not yet sent to this minute's bucket in Redis (the dashboard); when
        Redis is down they wait for the next flush. The totals do not depend on it."""
        self.collect()
        with self._lock:
            deltas, self._unsent = self._unsent, defaultdict(float)
        if not deltas:
            return
        minute_key = MINUTE_KEY.format(minute=int(time.time() // 60))
        try:
            pipe = client.pipeline(transaction=False)
            for key, value in deltas.items():
                pipe.hincrbyfloat(minute_key, key, value)
            pipe.expire(minute_key, MINUTE_TTL)
            pipe.execute()
        except Exception:
            with self._lock:
                for key, value in deltas.items():
                    self._unsent[key] += value
            raise

    def _path(self) -> Path:
        assert self.directory is not None
        return self.directory / f"{FILE_PREFIX}{self.pid}.json"


def _read_file(path: Path) -> dict[str, float]:
    """One process's totals; nothing when the file is missing or unreadable."""
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_bytes())
        if isinstance(data, dict):
            return {
                str(k): float(v)
                for k, v in data.items()
                if isinstance(v, (int, float)) and math.isfinite(v)
            }
    return {}


def metrics_dir_prepare(directory: str | os.PathLike[str]) -> Path:
    """Creates the listener's metrics directory (mode 0700) and removes the files an earlier
    run left: called once by the listener's parent process, before its workers start."""
    path = Path(directory)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    for leftover in path.glob(f"{FILE_PREFIX}*.json"):
        leftover.unlink(missing_ok=True)
    for leftover in path.glob(f".{FILE_PREFIX}*.tmp"):
        leftover.unlink(missing_ok=True)
    return path


def _parse(raw: dict) -> dict[str, float]:
    return {(k.decode() if isinstance(k, bytes) else k): float(v) for k, v in raw.items()}


def _number(value: float) -> str:
    """A sample value as Prometheus reads it: integers exactly (`%g` turned 1234567 into
    1.23457e+06), others with full precision."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def _label(value: str) -> str:
    """A label value escaped as the text format requires (backslash, quote, newline)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# Per-process gauges (runtime.ExtenderRuntime.gauges): name -> help text.
PROCESS_GAUGES = {
    "policies_counter": "The published policies' counter this process serves.",
    "policies_age_seconds": "Seconds since this process started serving that set.",
    "snapshot_version": "The cluster snapshot version this process holds.",
    "snapshot_version_age_seconds": "Seconds since the watcher wrote that version.",
    "snapshot_lag_seconds": "From the watcher writing the last change to this process applying it.",
}


def render_prometheus(
    totals: dict[str, float],
    *,
    gauges: dict[str, float],
    processes: dict[int, dict[str, float]] | None = None,
) -> str:
    """Prometheus text exposition (format 0.0.4) of the listener's totals plus gauges, and
    each process's gauges labelled by pid."""
    lines: list[str] = []
    series: dict[str, list[str]] = defaultdict(list)

    def sample(kind: str, name: str, labels: dict[str, str], value: float) -> None:
        text = ",".join(f'{key}="{_label(str(label))}"' for key, label in labels.items())
        series[kind].append(
            f"{name}{{{text}}} {_number(value)}" if text else f"{name} {_number(value)}"
        )

    for key, value in sorted(totals.items()):
        kind, *labels = key.split("|")
        if kind == "requests" and len(labels) == 2:
            verb, code = labels
            sample(kind, "schedweb_extender_requests_total", {"verb": verb, "code": code}, value)
        elif kind == "errors" and len(labels) == 2:
            verb, error = labels
            sample(kind, "schedweb_extender_errors_total", {"verb": verb, "kind": error}, value)
        elif kind == "decisions" and len(labels) == 3:
            policy, version, verb = labels
            sample(
                kind,
                "schedweb_extender_decisions_total",
                {"policy": policy, "version": version, "verb": verb},
                value,
            )
        elif kind == "passthrough" and len(labels) == 1:
            sample(kind, "schedweb_extender_passthrough_total", {"verb": labels[0]}, value)
        elif kind == "refused" and len(labels) == 2:
            path, client = labels
            sample(kind, "schedweb_extender_refused_total", {"path": path, "client": client}, value)
        elif kind == "requeue_evicted" and not labels:
            sample(kind, "schedweb_requeue_evictions_total", {}, value)
        elif kind == "catch_up" and len(labels) == 1:
            sample(kind, "schedweb_extender_catch_up_total", {"outcome": labels[0]}, value)
        elif kind == "catch_up_seconds" and len(labels) == 1:
            sample(kind, "schedweb_extender_catch_up_seconds_total", {"outcome": labels[0]}, value)
        elif kind == "shadow_judged" and len(labels) == 1:
            sample(kind, "schedweb_extender_shadow_judged_total", {"outcome": labels[0]}, value)
            if labels[0] == "error":
                sample("shadow_errors", "schedweb_extender_shadow_errors_total", {}, value)
        elif kind == "shadow_differed" and len(labels) == 1:
            sample(kind, "schedweb_extender_shadow_differed_total", {"kind": labels[0]}, value)
        elif kind == "shadow_skipped" and not labels:
            sample(kind, "schedweb_extender_shadow_skipped_total", {}, value)
        elif kind == "canary_judged" and len(labels) == 2:
            arm, outcome = labels
            sample(
                kind,
                "schedweb_extender_canary_judged_total",
                {"arm": arm, "outcome": outcome},
                value,
            )
        elif kind == "canary_guard_trips" and len(labels) == 1:
            sample(kind, "schedweb_extender_canary_guard_trips_total", {"policy": labels[0]}, value)
    verbs = sorted({k.split("|")[1] for k in totals if k.startswith("latency_count|")})
    name = "schedweb_extender_request_duration_seconds"
    for verb in verbs:
        cumulative = 0.0
        for bound in (*BUCKETS, "+Inf"):
            cumulative += totals.get(f"latency_bucket|{verb}|{bound}", 0.0)
            sample("latency", f"{name}_bucket", {"verb": verb, "le": str(bound)}, cumulative)
        sample("latency", f"{name}_sum", {"verb": verb}, totals.get(f"latency_sum|{verb}", 0.0))
        sample("latency", f"{name}_count", {"verb": verb}, cumulative)
    if any(k.startswith("shadow_bucket|") for k in totals):
        name = "schedweb_extender_shadow_duration_seconds"
        cumulative = 0.0
        for bound in (*BUCKETS, "+Inf"):
            cumulative += totals.get(f"shadow_bucket|{bound}", 0.0)
            sample("shadow_time", f"{name}_bucket", {"le": str(bound)}, cumulative)
        sample("shadow_time", f"{name}_sum", {}, totals.get("shadow_sum", 0.0))
        sample("shadow_time", f"{name}_count", {}, cumulative)
    headers = {
        "requests": (
            "schedweb_extender_requests_total",
            "counter",
            "Extender requests by verb and HTTP status.",
        ),
        "errors": (
            "schedweb_extender_errors_total",
            "counter",
            "Internal errors and malformed requests by verb.",
        ),
        "decisions": (
            "schedweb_extender_decisions_total",
            "counter",
            "Requests answered by each policy version.",
        ),
        "passthrough": (
            "schedweb_extender_passthrough_total",
            "counter",
            "Requests for pods no active policy targets.",
        ),
        "refused": (
            "schedweb_extender_refused_total",
            "counter",
            "Requests refused (403) because the client certificate may not use the path.",
        ),
        "requeue_evicted": (
            "schedweb_requeue_evictions_total",
            "counter",
            "Older rejected pods evicted from the full requeue store to keep newer ones.",
        ),
        "latency": (
            "schedweb_extender_request_duration_seconds",
            "histogram",
            "Server-side latency per verb.",
        ),
        "catch_up": (
            "schedweb_extender_catch_up_total",
            "counter",
            "Requests that waited for the snapshot to catch up, by outcome.",
        ),
        "catch_up_seconds": (
            "schedweb_extender_catch_up_seconds_total",
            "counter",
            "Seconds those requests waited, by outcome.",
        ),
        "shadow_judged": (
            "schedweb_extender_shadow_judged_total",
            "counter",
            "Pods a shadow version judged after the answer, by outcome against the active one.",
        ),
        "shadow_differed": (
            "schedweb_extender_shadow_differed_total",
            "counter",
            "Shadow judgements that differed, by kind (a pod may count under several).",
        ),
        "shadow_errors": (
            "schedweb_extender_shadow_errors_total",
            "counter",
            "Shadow judgements that failed or ran past their slice.",
        ),
        "canary_judged": (
            "schedweb_extender_canary_judged_total",
            "counter",
            "Filter answers during a canary, by the arm that judged (canary, stable) and outcome "
            "(passed, rejected: on every node, error).",
        ),
        "canary_guard_trips": (
            "schedweb_extender_canary_guard_trips_total",
            "counter",
            "Canaries this process saw the guard roll back (worse than stable past the threshold).",
        ),
        "shadow_skipped": (
            "schedweb_extender_shadow_skipped_total",
            "counter",
            "Pods a shadow did not judge: its share of the process's time was spent.",
        ),
        "shadow_time": (
            "schedweb_extender_shadow_duration_seconds",
            "histogram",
            "CPU time of each shadow evaluation.",
        ),
    }
    for key, (metric, kind, text) in headers.items():
        lines += [f"# HELP {metric} {text}", f"# TYPE {metric} {kind}", *series.get(key, [])]
    for gauge, value in sorted(gauges.items()):
        lines += [f"# TYPE {gauge} gauge", f"{gauge} {_number(value)}"]
    for name, text in PROCESS_GAUGES.items():
        rows = [
            f'schedweb_extender_{name}{{pid="{pid}"}} {_number(values[name])}'
            for pid, values in sorted((processes or {}).items())
            if name in values
        ]
        if rows:
            metric = f"schedweb_extender_{name}"
            lines += [f"# HELP {metric} {text}", f"# TYPE {metric} gauge", *rows]
    return "\n".join(lines) + "\n"


def recent_summary(client, *, minutes: int = 5) -> dict[str, float | None]:
    """Requests per second, p99 latency (ms) and errors over the last `minutes` full minutes."""
    now_minute = int(time.time() // 60)
    pipe = client.pipeline(transaction=False)
    for m in range(now_minute - minutes, now_minute + 1):
        pipe.hgetall(MINUTE_KEY.format(minute=m))
    merged: dict[str, float] = defaultdict(float)
    for raw in pipe.execute():
        for key, value in _parse(raw).items():
            merged[key] += value
    requests = sum(v for k, v in merged.items() if k.startswith("requests|"))
    errors = sum(v for k, v in merged.items() if k.startswith("errors|"))
    elapsed = minutes * 60 + (time.time() % 60)
    counts = [
        (
            b,
            sum(
                v
                for k, v in merged.items()
                if k.startswith("latency_bucket|") and k.endswith(f"|{b}")
            ),
        )
        for b in (*BUCKETS, "+Inf")
    ]
    total = sum(c for _, c in counts)
    p99 = None
    if total:
        running = 0.0
        for bound, count in counts:
            running += count
            if running >= 0.99 * total:
                p99 = None if bound == "+Inf" else float(bound) * 1000
                break
    return {
        "requestsPerSecond": requests / elapsed,
        "p99Ms": p99,
        "errors": errors,
        "requests": requests,
    }
