"""Extender metrics: counted in process memory on the hot path, flushed to Redis in the background.

The app server runs several worker processes; each counts its own requests without locks or I/O in
the request, and a background thread adds the deltas to Redis once a second. `/metrics` renders
the cluster-wide totals from Redis (Prometheus text format), and per-minute buckets feed the
dashboard's "requests per second, p99, errors in the last minutes".
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

# Upper bounds in seconds; the extender's budget is a few ms (p99 target 10 ms).
BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.05, 0.1, 0.25, 1.0)
TOTALS_KEY = "schedweb:metrics:extender"
MINUTE_KEY = "schedweb:metrics:extender:minute:{minute}"
MINUTE_TTL = 3 * 3600


class Metrics:
    """Counters and latency histograms per verb; `observe` is the only hot-path call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, float] = defaultdict(float)

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

    def take(self) -> dict[str, float]:
        """The deltas since the last call (for the flusher)."""
        with self._lock:
            pending, self._pending = self._pending, defaultdict(float)
        return dict(pending)

    def flush(self, client) -> None:
        """Adds the pending deltas to the Redis totals and to this minute's bucket."""
        deltas = self.take()
        if not deltas:
            return
        minute_key = MINUTE_KEY.format(minute=int(time.time() // 60))
        try:
            pipe = client.pipeline(transaction=False)
            for key, value in deltas.items():
                pipe.hincrbyfloat(TOTALS_KEY, key, value)
                pipe.hincrbyfloat(minute_key, key, value)
            pipe.expire(minute_key, MINUTE_TTL)
            pipe.execute()
        except Exception:
            # Redis is down: keep the deltas for the next flush rather than lose them.
            with self._lock:
                for key, value in deltas.items():
                    self._pending[key] += value
            raise


def _parse(raw: dict) -> dict[str, float]:
    return {(k.decode() if isinstance(k, bytes) else k): float(v) for k, v in raw.items()}


def render_prometheus(totals: dict[str, float], *, gauges: dict[str, float]) -> str:
    """Prometheus text exposition of the flushed totals plus this process's gauges."""
    lines: list[str] = []
    series: dict[str, list[str]] = defaultdict(list)
    for key, value in sorted(totals.items()):
        kind, *labels = key.split("|")
        if kind == "requests":
            verb, code = labels
            series["requests"].append(
                f'schedweb_extender_requests_total{{verb="{verb}",code="{code}"}} {value:g}'
            )
        elif kind == "errors":
            verb, error = labels
            series["errors"].append(
                f'schedweb_extender_errors_total{{verb="{verb}",kind="{error}"}} {value:g}'
            )
        elif kind == "decisions":
            policy, version, verb = labels
            series["decisions"].append(
                f'schedweb_extender_decisions_total{{policy="{policy}",version="{version}",verb="{verb}"}} {value:g}'
            )
        elif kind == "passthrough":
            series["passthrough"].append(
                f'schedweb_extender_passthrough_total{{verb="{labels[0]}"}} {value:g}'
            )
    verbs = sorted({k.split("|")[1] for k in totals if k.startswith("latency_count|")})
    for verb in verbs:
        cumulative = 0.0
        for bound in (*BUCKETS, "+Inf"):
            cumulative += totals.get(f"latency_bucket|{verb}|{bound}", 0.0)
            series["latency"].append(
                f'schedweb_extender_request_duration_seconds_bucket{{verb="{verb}",le="{bound}"}} {cumulative:g}'
            )
        series["latency"].append(
            f'schedweb_extender_request_duration_seconds_sum{{verb="{verb}"}} {totals.get(f"latency_sum|{verb}", 0.0):.6f}'
        )
        series["latency"].append(
            f'schedweb_extender_request_duration_seconds_count{{verb="{verb}"}} {totals.get(f"latency_count|{verb}", 0.0):g}'
        )
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
        "latency": (
            "schedweb_extender_request_duration_seconds",
            "histogram",
            "Server-side latency per verb.",
        ),
    }
    for key, (name, kind, text) in headers.items():
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", *series.get(key, [])]
    for name, value in sorted(gauges.items()):
        lines += [f"# TYPE {name} gauge", f"{name} {value:g}"]
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


def totals_read(client) -> dict[str, float]:
    return _parse(client.hgetall(TOTALS_KEY))
