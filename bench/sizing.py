"""Sizing (issue 26): the memory of the extender's and the worker's processes by cluster size, the
figures behind the README's sizing table and the Helm chart's memory check.

For each size in SIZES a synthetic cluster (policies/cluster/demo.py generate_cluster, with the
Namespaces, ReplicaSets and Services a real one has) is measured as the pods run it:
- the extender: `python -m schedweb.extender_server` as shipped (one uvicorn worker) serving
  the snapshot from Redis, after a filter and a prioritize over 500 of its nodes and filters
  large enough for the offload pool (a child forked from the listener for each, sharing its
  pages), across a full reload; the listener's resident memory (RSS) and peak (VmHWM) at rest,
  then, while 60 large filters are answered one after another, the largest sum of the
  listener's RSS and the pages only its children map (a page a child shares with the listener
  counted once, as the pod's memory cgroup counts it), and the children's own pages then; that
  sum (in use) and the listener's RSS (at rest) against issue 28's targets;
- the worker: the snapshot watcher's first sync (the list responses decoded, turned into state,
  written whole to Redis) and a task reading the snapshot (the requeue sweep every 2 s), each in a
  process of its own (bench/sizing_worker.py), peaks; and an idle process (Django and schedweb
  imported) for the floor.
A pod's need is the sum of its processes' peaks: extender = listener + what a forked child adds
(the in-use sum less the listener at rest) + resource tracker; worker (concurrency 2) = Celery's main process (the idle floor) + the watcher's child +
a child reading the snapshot. The least-squares line through the rows (MiB = a + b per node + c
per 1000 pods) is printed with the chart's values: deploy/helm/schedweb/values.yaml `sizing`.

`python -m bench sizing` runs it alone (Redis and a SQLite database of its own, the bench policy
published); the extender suite runs the same table on its stack. SCHEDWEB_BENCH_SIZES="500x5000,
5000x150000" chooses the sizes.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = "bench-sizing"
# Nodes x pods: a small cluster, a middle one, bench's 5000 x 50 000 and the large end of the
# Kubernetes scalability envelope, 5000 x 150 000 (issue 28: measured, no longer extrapolated;
# at least three sizes not on a line, so that the fit below is determined).
SIZES = [(500, 5_000), (1_000, 30_000), (5_000, 50_000), (5_000, 150_000)]
# Issue 28: the extender's processes together (RSS) at most this many MB at (nodes, pods).
TOGETHER_TARGET_MB = {(5_000, 50_000): 400, (5_000, 150_000): 1000}


def sizes_from_env() -> list[tuple[int, int]]:
    raw = os.environ.get("SCHEDWEB_BENCH_SIZES", "")
    if not raw:
        return list(SIZES)
    return [tuple(int(n) for n in part.split("x")) for part in raw.split(",")]  # type: ignore[misc]


def _status(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _process_tree(root: int) -> list[int]:
    from .throughput import _process_tree

    return _process_tree(root)


def _worker_measure(
    mode: str, directory: Path, env: dict[str, str], *extra: str
) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.sizing_worker", mode, str(directory), *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"sizing_worker {mode}: {done.stderr[-2000:]}")
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def _reader_measure(directory: Path, env: dict[str, str]) -> dict[str, float]:
    """A process reading the snapshot, across a rewrite of it (sizing_worker's read mode)."""
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.sizing_worker", "read", str(directory)],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdin is not None and child.stdout is not None
        line = child.stdout.readline()
        if line.strip() != "loaded":
            raise RuntimeError(f"sizing_worker read: {line!r}")
        _worker_measure("rewrite", directory, env)
        child.stdin.write("go\n")
        child.stdin.flush()
        out, _ = child.communicate(timeout=1800)
    finally:
        if child.poll() is None:
            child.kill()
    if child.returncode != 0:
        raise RuntimeError(f"sizing_worker read exited {child.returncode}")
    return json.loads(out.strip().splitlines()[-1])


def _post(port: int, verb: str, names: list[str]) -> None:
    from .extender import _normal_body

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        connection.request(
            "POST", f"/extender/{verb}", _normal_body(names), {"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"{verb}: HTTP {response.status}")
    finally:
        connection.close()


def _snapshot_version(port: int) -> float | None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", "/metrics")
        for line in connection.getresponse().read().decode().splitlines():
            if line.startswith("schedweb_snapshot_version "):
                return float(line.split()[1])
        return None
    finally:
        connection.close()


def _extender_measure(env: dict[str, str], workdir: Path, node_names: list[str], rewrite) -> dict:
    """The listener's processes' RSS and peak once it served the snapshot Redis holds, then
    loaded it again whole (`rewrite()` writes it as a new history) while holding the old one."""
    from tests.harness.processes import ManagedProcess, free_ports

    (port,) = free_ports(count=1)
    listener_env = {k: v for k, v in env.items() if "_TLS_" not in k and "CLIENT_CA" not in k}
    listener_env |= {
        "SCHEDWEB_EXTENDER_PORT": str(port),
        "SCHEDWEB_EXTENDER_WORKERS": "1",
    }
    process = ManagedProcess(
        name="extender-sizing",
        argv=[sys.executable, "-m", "schedweb.extender_server"],
        log_path=workdir / "extender-sizing.log",
        env=listener_env,
        cwd=ROOT,
    )
    process.start()
    try:
        process.wait_ready(
            check=lambda: _snapshot_version(port) is not None,
            timeout=1800,
            what="the snapshot loaded",
        )
        first = _snapshot_version(port)
        names = node_names[:500]
        # the offload pool takes bodies over the inline limit (128 KiB): every name and more
        large = node_names + [f"nowhere-{i:05d}" for i in range(max(0, 8000 - len(node_names)))]
        for verb, candidates in (("filter", names), ("prioritize", names), ("filter", large)):
            _post(port, verb, candidates)
        rewrite()

        def reloaded() -> bool:
            # the offload process kept in use meanwhile (a large body every check): its figure
            # is then that of a process that held a snapshot and loaded the next, not of one
            # that let go of it while the listener reloaded (at 150 000 pods, over 10 s)
            _post(port, "filter", large)
            return _snapshot_version(port) != first

        process.wait_ready(check=reloaded, timeout=1800, what="the reload")
        time.sleep(1.5)  # its housekeeping (every 0.5 s) trims the heap after the load
        pid = process.pid
        processes = {
            "listener": {"rss_mb": _status(pid, "VmRSS"), "peak_mb": _status(pid, "VmHWM")}
        }
        # In use: large bodies one after another, each answered by a child forked for it; the
        # listener's RSS and its children's own pages (what they share counted once, as the
        # pod's memory cgroup counts it) summed at every sample, and the largest sum kept.
        busiest = _in_use(port, pid, large)
        processes["offload"] = {
            # what a child adds: the sum less the listener alone
            "peak_mb": max(0.0, busiest["sum_mb"] - processes["listener"]["rss_mb"]),
            "rss_mb": busiest["child_private_mb"],  # its pages not shared with the listener
            "sum_mb": busiest["sum_mb"],
            "children": busiest["children"],
        }
        for child in _process_tree(pid):
            if child != pid and b"resource_tracker" in Path(f"/proc/{child}/cmdline").read_bytes():
                processes["tracker"] = {
                    "rss_mb": _status(child, "VmRSS"),
                    "peak_mb": _status(child, "VmHWM"),
                }
        return processes
    finally:
        process.stop(grace=5)


def _smaps(pid: int) -> dict[str, float]:
    """A process's smaps_rollup figures in MB (empty once it is gone)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines()[1:]:
        name, _, value = line.partition(":")
        with contextlib.suppress(ValueError, IndexError):
            out[name] = int(value.split()[0]) / 1024
    return out


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _in_use(port: int, root: int, large: list[str], *, bodies: int = 60) -> dict[str, float]:
    """The extender's processes while `bodies` large filters are answered one after another
    (from a thread): the largest sum, over the samples, of the listener's resident memory and
    the pages only its children (forked for the bodies) map, each page counted once as the
    pod's memory cgroup counts it; and the children's own pages at that moment."""
    import threading

    done = threading.Event()

    def send() -> None:
        try:
            for _ in range(bodies):
                _post(port, "filter", large)
        finally:
            done.set()

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    best = {"sum_mb": 0.0, "child_private_mb": 0.0, "children": 0}
    own = Path(f"/proc/{root}/cmdline").read_bytes()
    while not done.is_set():
        figures = {pid: _smaps(pid) for pid in _process_tree(root)}
        children = [f for pid, f in figures.items() if pid != root and f and _cmdline(pid) == own]
        if not children:
            continue
        private = sum(f.get("Private_Clean", 0) + f.get("Private_Dirty", 0) for f in children)
        total = figures[root].get("Rss", 0.0) + private
        if total > best["sum_mb"]:
            best = {"sum_mb": total, "child_private_mb": private, "children": len(children)}
    sender.join()
    return best


def measure(env: dict[str, str], workdir: Path, nodes: int, pods: int) -> dict:
    """One row of the table: every process's figures and each pod's need, in MB."""
    import redis as redis_client

    from policies.cluster.store import StoreKeys

    env = env | {"SCHEDWEB_CLUSTER_NAME": CLUSTER, "SCHEDWEB_CLUSTER_SOURCE": "live"}
    directory = Path(tempfile.mkdtemp(prefix=f"sizing-{nodes}-{pods}-", dir=workdir))
    try:
        _worker_measure("generate", directory, env, str(nodes), str(pods))
        listed = orjson.loads((directory / "nodes.json").read_bytes())
        node_names = [node["metadata"]["name"] for node in listed]
        del listed
        watch = _worker_measure("watch", directory, env)
        client = redis_client.Redis.from_url(env["SCHEDWEB_REDIS_URL"])
        # every field counted (samples=0): MEMORY USAGE estimates a hash from 5 of its fields,
        # and the stored state is in pieces (issue 28)
        store_mb = client.memory_usage(StoreKeys(CLUSTER).full, samples=0) or 0
        read = _reader_measure(directory, env)
        extender = _extender_measure(
            env, workdir, node_names, lambda: _worker_measure("rewrite", directory, env)
        )
    finally:
        with contextlib.suppress(OSError):
            for leftover in directory.iterdir():
                leftover.unlink()
            directory.rmdir()
    return {
        "nodes": nodes,
        "pods": pods,
        "extender": extender,
        "watch": watch,
        "read": read,
        "redis_snapshot_mb": store_mb / 1e6,
    }


def _least_squares(rows: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """(a, b, c) minimising the squares of a + b x + c y - z over rows (x, y, z): the normal
    equations, 3x3, by Cramer's rule (rows with at least 3 different (x, y) needed)."""
    n = len(rows)
    sx = sum(r[0] for r in rows)
    sy = sum(r[1] for r in rows)
    sxx = sum(r[0] * r[0] for r in rows)
    syy = sum(r[1] * r[1] for r in rows)
    sxy = sum(r[0] * r[1] for r in rows)
    sz = sum(r[2] for r in rows)
    sxz = sum(r[0] * r[2] for r in rows)
    syz = sum(r[1] * r[2] for r in rows)
    m = [[n, sx, sy], [sx, sxx, sxy], [sy, sxy, syy]]
    v = [sz, sxz, syz]

    def det(a: list[list[float]]) -> float:
        return (
            a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1])
            - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
            + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0])
        )

    d = det(m)
    if abs(d) < 1e-9:
        raise ValueError("the sizes do not determine a plane (give 3 different ones)")
    out = []
    for column in range(3):
        replaced = [row[:] for row in m]
        for i in range(3):
            replaced[i][column] = v[i]
        out.append(det(replaced) / d)
    return out[0], out[1], out[2]


WEB_WORKERS = 2  # the chart's web.workers: each uvicorn worker loads the snapshot for pages


def pod_needs(row: dict, idle: float) -> dict[str, float]:
    """Each pod's need in MB, the sum of its processes' peaks: the extender's listener, offload
    worker and resource tracker; the worker's Celery main process (about an idle one), the
    child running the watch and a child reading the snapshot (concurrency 2); the web's uvicorn
    supervisor (idle) and WEB_WORKERS workers reading the snapshot (the cluster page, previews)."""
    return {
        "extender": sum(p["peak_mb"] for p in row["extender"].values()),
        "worker": idle + row["watch"]["peak_mb"] + row["read"]["peak_mb"],
        "web": idle + WEB_WORKERS * row["read"]["peak_mb"],
    }


def table(env: dict[str, str], workdir: Path, sizes: list[tuple[int, int]] | None = None) -> dict:
    """Measures every size, prints the table and the fitted lines; the figures by name."""
    sizes = sizes or sizes_from_env()
    idle = _worker_measure("idle", workdir, env | {"SCHEDWEB_CLUSTER_NAME": CLUSTER})["peak_mb"]
    print(
        "== sizing: memory by cluster size, MB (`python -m bench sizing`; RSS/peak = VmRSS/VmHWM"
        " once loaded)\n"
        f"  an idle schedweb process (Django and schedweb's modules imported): {idle:.0f} MB"
    )
    print(
        f"  {'nodes':>6} {'pods':>7} | {'listener':>11} {'offload':>11} | {'watcher':>11}"
        f" {'reader':>11} | pods' needs: {'extender':>8} {'worker':>7} {'web':>6} | {'redis':>5}"
    )
    rows, results = [], {}
    for nodes, pods in sizes:
        started = time.monotonic()
        row = measure(env, workdir, nodes, pods)
        row["needs"] = needs = pod_needs(row, idle)
        rows.append(row)

        def both(figures: dict) -> str:
            return f"{figures.get('rss_mb', 0):5.0f}/{figures.get('peak_mb', 0):<5.0f}"

        ext = row["extender"]
        print(
            f"  {nodes:6d} {pods:7d} | {both(ext['listener'])} {both(ext.get('offload', {}))} |"
            f" {both(row['watch'])} {both(row['read'])} |"
            f"              {needs['extender']:8.0f} {needs['worker']:7.0f} {needs['web']:6.0f} |"
            f" {row['redis_snapshot_mb']:5.0f}   ({time.monotonic() - started:.0f} s)"
        )
        for pod, need in needs.items():
            results[f"sizing_{pod}_mb_{nodes}_{pods}"] = need
        offload = ext.get("offload", {})
        tracker = ext.get("tracker", {}).get("rss_mb", 0)
        at_rest = ext["listener"]["rss_mb"] + tracker
        in_use = offload.get("sum_mb", at_rest)
        target = TOGETHER_TARGET_MB.get((nodes, pods))
        verdict = ""
        if target:
            verdict = f" (issue 28: at most {target}: {'ok' if in_use <= target else 'OVER'}"
            verdict += f" in use, {'ok' if at_rest <= target else 'OVER'} at rest)"
        print(
            f"    the extender's processes together: {in_use:.0f} MB in use (the listener's RSS"
            f" and its children's own pages, the largest sum while large bodies were answered:"
            f" {offload.get('children', 0)} child(ren) then, {offload.get('rss_mb', 0):.0f} MB of"
            f" their own), {at_rest:.0f} MB at rest (RSS, no child){verdict}"
        )
        results[f"sizing_extender_rss_mb_{nodes}_{pods}"] = in_use
        results[f"sizing_extender_rest_mb_{nodes}_{pods}"] = at_rest
    if len({(r["nodes"], r["pods"]) for r in rows}) >= 3:
        print(
            "  each process's peak, least squares over the rows: MB = base + per 1000 nodes +"
            " per 1000 pods (the chart's schedweb.sizingModel, templates/_helpers.tpl)"
        )
        processes = {
            "listener": lambda r: r["extender"]["listener"]["peak_mb"],
            "offload": lambda r: r["extender"].get("offload", {}).get("peak_mb", 0.0),
            "watcher": lambda r: r["watch"]["peak_mb"],
            "reader": lambda r: r["read"]["peak_mb"],
            "redis": lambda r: r["redis_snapshot_mb"],
        }
        for process, figure in processes.items():
            points = [(r["nodes"] / 1000, r["pods"] / 1000, figure(r)) for r in rows]
            try:
                a, b, c = _least_squares(points)
            except ValueError as exc:
                print(f"    {process}: no fit ({exc})")
                continue
            print(f"    {process + ':':9s} [{a:.1f}, {b:.1f}, {c:.1f}]")
            results[f"sizing_{process}_fit"] = (a, b, c)  # type: ignore[assignment]
        print("  each pod's need, least squares over the rows:")
        for pod in ("extender", "worker", "web"):
            points = [(r["nodes"] / 1000, r["pods"] / 1000, r["needs"][pod]) for r in rows]
            try:
                a, b, c = _least_squares(points)
            except ValueError as exc:
                print(f"    {pod}: no fit ({exc})")
                continue
            worst = max(abs(a + b * x + c * y - z) for x, y, z in points)
            large = a + b * 5 + c * 150
            print(
                f"    {pod:8s} pod: {a:5.0f} MB + {b:4.0f} MB per 1000 nodes + {c:5.1f} MB per"
                f" 1000 pods (largest miss {worst:.0f} MB); at 5000 nodes and 150 000 pods"
                f" {large:.0f} MB"
            )
            results[f"sizing_{pod}_fit_base_mb"] = a
            results[f"sizing_{pod}_fit_mb_per_1000_nodes"] = b
            results[f"sizing_{pod}_fit_mb_per_1000_pods"] = c
    return results


def run() -> dict:
    """Standalone: Redis and a database of its own, the bench policy published, then table()."""
    import yaml

    from tests.e2e.stack import RedisServer

    from .engine import POLICY

    workdir = Path(tempfile.mkdtemp(prefix="schedweb-sizing-"))
    redis = RedisServer(workdir / "redis").start()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SCHEDWEB_", "DJANGO_"))
    } | {
        "DJANGO_SETTINGS_MODULE": "schedweb.settings",
        "SCHEDWEB_SECRET_KEY": "bench-sizing",
        "SCHEDWEB_DEBUG": "0",
        "SCHEDWEB_REDIS_URL": redis.url,
        "SCHEDWEB_DATABASE_URL": f"sqlite:///{workdir / 'db.sqlite3'}",
        "SCHEDWEB_LOG_LEVEL": "WARNING",
    }
    try:
        manage = [sys.executable, str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, cwd=ROOT, check=True)
        policy = yaml.safe_load(POLICY)
        policy["schedulerNames"] = ["schedweb"]
        code = (
            "from policies import services; from policies.models import Policy;"
            f"p = services.policy_create(actor=None, document={yaml.safe_dump(policy)!r});"
            "services.policy_publish(actor=None, policy=p, message='bench', revision=p.draft_revision)"
        )
        subprocess.run([*manage, "shell", "-c", code], env=env, cwd=ROOT, check=True)
        return table(env, workdir)
    finally:
        redis.stop()
