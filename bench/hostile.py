"""The hostile-load case of issue 14: while HOSTILE_CLIENTS clients keep sending 7 MB filter
bodies (HOSTILE_NODES bare Node objects in Nodes.items), a normal 500-name filter on a keep-alive
connection (as kube-scheduler sends it) and /healthz on another, against the extender's listener
as shipped (a real subprocess, mutual TLS). Targets: filter p99 < 50 ms, /healthz max < 100 ms.

The hostile clients run in a process of their own (threads; each sends, reads the answer and
starts again on a new connection), so that their Python work does not take the GIL from the
measuring client. They present kube-scheduler's client certificate: without one, mutual TLS
refuses them at the handshake; with it they are the worst case (a misbehaving or compromised
scheduler, or a listener without a client CA).
"""

from __future__ import annotations

import http.client
import multiprocessing
import ssl
import threading
import time
from collections import Counter
from pathlib import Path

import orjson

from .stats import Timing

HOSTILE_CLIENTS = 6
HOSTILE_NODES = 200_000
FILTER_P99_TARGET_MS = 50.0
HEALTHZ_MAX_TARGET_MS = 100.0
NORMAL_REQUESTS = 300  # at least; and on until every hostile client has had HOSTILE_ROUNDS answers
HOSTILE_ROUNDS = 3
MEASURE_SECONDS_MAX = 60.0
HEALTHZ_EVERY = 5  # one /healthz per this many filters


def _context(tls_dir: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(Path(tls_dir) / "ca.crt"))
    context.load_cert_chain(Path(tls_dir) / "client.crt", Path(tls_dir) / "client.key")
    return context


def hostile_body(pod: dict) -> bytes:
    nodes = [{"metadata": {"name": f"n{i:07d}"}} for i in range(HOSTILE_NODES)]
    return orjson.dumps({"Pod": pod, "Nodes": {"items": nodes}, "NodeNames": None})


def _hostile_process(port: int, tls_dir: str, pod: dict, started, answered, stop, results) -> None:
    """In a child process: HOSTILE_CLIENTS threads sending the body until `stop` is set; the
    answers' statuses (or the error names) go to `results` at the end."""
    body = hostile_body(pod)
    context = _context(tls_dir)
    counts: Counter[str] = Counter()
    lock = threading.Lock()

    def client() -> None:
        first = True
        while not stop.is_set():
            connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=60)
            try:
                connection.request(
                    "POST", "/extender/filter", body, {"Content-Type": "application/json"}
                )
                if first:
                    first = False
                    with started.get_lock():
                        started.value += 1
                response = connection.getresponse()
                response.read()
                outcome = str(response.status)
            except (OSError, http.client.HTTPException) as exc:
                outcome = type(exc).__name__  # a 503 sent before the body was read closes it
            finally:
                connection.close()
            with lock:
                counts[outcome] += 1
            with answered.get_lock():
                answered.value += 1

    threads = [threading.Thread(target=client, daemon=True) for _ in range(HOSTILE_CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.put(dict(counts))


def hostile_load(*, port: int, tls_dir: Path, normal_body: bytes, hostile_pod: dict) -> dict:
    """Measures the normal filter and /healthz while the hostile clients run; prints the figures
    and pass/fail."""
    context = _context(str(tls_dir))
    filter_connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
    health_connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)

    def timed_filter() -> float:
        start = time.perf_counter()
        filter_connection.request(
            "POST", "/extender/filter", normal_body, {"Content-Type": "application/json"}
        )
        response = filter_connection.getresponse()
        response.read()
        elapsed = time.perf_counter() - start
        assert response.status == 200, response.status
        return elapsed

    def timed_healthz() -> float:
        start = time.perf_counter()
        health_connection.request("GET", "/healthz")
        response = health_connection.getresponse()
        response.read()
        elapsed = time.perf_counter() - start
        assert response.status == 200, response.status
        return elapsed

    for _ in range(20):  # warm up both connections (TLS handshakes, pod cache)
        timed_filter()
    timed_healthz()
    quiet = Timing([timed_filter() for _ in range(100)])

    spawn = multiprocessing.get_context("spawn")
    started, answered = spawn.Value("i", 0), spawn.Value("i", 0)
    stop, results = spawn.Event(), spawn.Queue()
    loader = spawn.Process(
        target=_hostile_process,
        args=(port, str(tls_dir), hostile_pod, started, answered, stop, results),
        daemon=True,
    )
    loader.start()
    try:
        deadline = time.monotonic() + 120
        while started.value < HOSTILE_CLIENTS:  # every client has sent a whole body once
            if time.monotonic() > deadline or not loader.is_alive():
                raise RuntimeError("the hostile clients did not start")
            time.sleep(0.05)
        # Measured while the hostile bodies keep coming: at least NORMAL_REQUESTS filters, and
        # until the hostile clients have had HOSTILE_ROUNDS answers each (or a minute passed).
        filters, healthz = [], []
        until = time.monotonic() + MEASURE_SECONDS_MAX
        i = 0
        while i < NORMAL_REQUESTS or (
            answered.value < HOSTILE_ROUNDS * HOSTILE_CLIENTS and time.monotonic() < until
        ):
            filters.append(timed_filter())
            if i % HEALTHZ_EVERY == 0:
                healthz.append(timed_healthz())
            i += 1
        window = time.monotonic() - (until - MEASURE_SECONDS_MAX)
    finally:
        stop.set()
        counts = results.get(timeout=180)
        loader.join(30)
        filter_connection.close()
        health_connection.close()
    loaded = Timing(filters)
    healthz_max = max(healthz) * 1e3
    p99 = loaded.p99 * 1e3
    print(
        f"== hostile load: {HOSTILE_CLIENTS} clients sending {len(hostile_body(hostile_pod)) / 1e6:.1f} MB"
        f" filter bodies ({HOSTILE_NODES} bare Nodes) to the extender's listener (mutual TLS)"
    )
    print(f"  normal 500-name filter, no load    {quiet.ms()}")
    print(f"  normal 500-name filter, under load {loaded.ms()}")
    slow = sum(1 for h in healthz if h * 1e3 >= HEALTHZ_MAX_TARGET_MS)
    print(
        f"  /healthz under load: max {healthz_max:.1f} ms, {Timing(healthz).ms().strip()};"
        f" {slow} of {len(healthz)} at {HEALTHZ_MAX_TARGET_MS:g} ms or more"
    )
    print(f"  hostile answers in {window:.1f} s: {dict(sorted(counts.items()))}")
    print(
        f"  filter p99 {p99:.1f} ms < {FILTER_P99_TARGET_MS:g} ms: "
        f"{'PASS' if p99 < FILTER_P99_TARGET_MS else 'FAIL'};"
        f" /healthz max {healthz_max:.1f} ms < {HEALTHZ_MAX_TARGET_MS:g} ms: "
        f"{'PASS' if healthz_max < HEALTHZ_MAX_TARGET_MS else 'FAIL'}"
    )
    return {
        "hostile_filter_quiet_median_ms": quiet.median * 1e3,
        "hostile_filter_median_ms": loaded.median * 1e3,
        "hostile_filter_p99_ms": p99,
        "hostile_healthz_max_ms": healthz_max,
        "hostile_pass": p99 < FILTER_P99_TARGET_MS and healthz_max < HEALTHZ_MAX_TARGET_MS,
    }
