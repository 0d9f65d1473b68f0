"""Extender benchmarks (issue 5), measured in one run on this machine:

1. server-side latency per verb for 500 candidate names: the extender service in process, and the
   same requests over HTTP to uvicorn (sequential client, keep-alive), median and p99;
2. where a request's time goes (parse, pod view, evaluate, respond);
3. kube-scheduler throughput for 1000 pods over 500 nodes, without an extender and with ours
   (filter + prioritize, the 2-filter + 3-score policy of bench/engine.py) over plain HTTP and
   over mutual TLS as `make run` configures it, same binaries, same API server, alternated for
   SCHEDWEB_BENCH_ROUNDS rounds (default 2), and the median ratios (TLS/plain: target >= 0.9);
4. the hostile-load case (bench/hostile.py): a normal filter and /healthz while 6 clients send
   7 MB bodies to the mutual-TLS listener.

The listener as shipped: `python -m schedweb.extender_server` with mutual TLS (certificates from
scripts/extender-certs.sh, as `make run`), and a second one in plain HTTP on loopback over the
same Redis and database for the plain comparison.

Needs the Kubernetes test binaries (scripts/k8s-binaries.sh) and redis-server.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import orjson

from .engine import POLICY
from .hostile import hostile_load
from .stats import measure

NODES = 500
PODS = 1000
# Without/with pairs, alternated: this VM's speed drifts over minutes, so one pair can land in
# different phases; the median of the pairs' ratios is reported.
ROUNDS = int(os.environ.get("SCHEDWEB_BENCH_ROUNDS", "2"))


def _pod(name: str, scheduler: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "bench"}},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }
            ],
        },
    }


def _service_latency(policy_text: str) -> dict[str, float]:
    """The extender service in process over a generated 500-node snapshot."""
    from django.conf import settings

    from policies.cluster.demo import generate_cluster
    from policies.cluster.loaded import LoadedCluster
    from policies.cluster.state import ClusterState
    from policies.engine.policy import compile_policy
    from policies.extender.metrics import Metrics
    from policies.extender.runtime import DecisionBuffer
    from policies.extender.service import Extender, ServedPolicy

    nodes_json, pods_json = generate_cluster(NODES, NODES * 4, seed=3)
    snapshot = LoadedCluster(
        ClusterState.from_objects(nodes_json, pods_json).freeze(), "live", "bench"
    )
    served = ServedPolicy("bench-2-3", 1, compile_policy(policy_text))
    # Decisions sampled and deferred exactly as in the product (policies/extender/runtime.py).
    decisions = DecisionBuffer(per_second=settings.SCHEDWEB_DECISIONS_PER_SECOND)
    extender = Extender(
        policies=lambda: {"schedweb": served},
        snapshot=lambda: snapshot,
        metrics=Metrics(),
        record=decisions.append,
        sample=decisions.wanted,
    )
    names = [n["name"] for n in snapshot.state.nodes()]
    pods = [
        dict(
            _pod(f"p{i}", "schedweb"),
            metadata={
                "name": f"p{i}",
                "namespace": "default",
                "uid": f"u{i}",
                "resourceVersion": "1",
            },
        )
        for i in range(50)
    ]
    bodies = [orjson.dumps({"Pod": p, "Nodes": None, "NodeNames": names}) for p in pods]
    results = {}
    print(f"== extender service in process: {NODES} node names per request (nodeCacheCapable)")
    for verb in ("filter", "prioritize"):
        call = getattr(extender, verb)
        timing = measure(lambda i, call=call: call(bodies[i % len(bodies)]), runs=400)
        print(f"  {verb:10s} {timing.ms()}")
        results[f"service_{verb}_median_ms"] = timing.median * 1e3
        results[f"service_{verb}_p99_ms"] = timing.p99 * 1e3
    # Where the time goes, for one filter + prioritize pair.
    from policies.cluster.convert import pod_view

    body = bodies[0]
    parse = measure(lambda i: orjson.loads(body), runs=400)
    view = measure(lambda i: pod_view(pods[i % len(pods)]), runs=400)
    known = [snapshot.state.node(n) for n in names]
    evaluate_f = measure(
        lambda i: served.compiled.evaluate(pod_view(pods[0]), known, snapshot.state, scores=False),
        runs=300,
    )
    evaluate_p = measure(
        lambda i: served.compiled.evaluate(pod_view(pods[0]), known, snapshot.state), runs=300
    )
    response = measure(lambda i: orjson.dumps([{"Host": n, "Score": 5} for n in names]), runs=400)
    print("  where a request's time goes (medians):")
    print(f"    JSON parse of the body      {parse.median * 1e3:7.3f} ms")
    print(
        f"    pod view from the Pod       {view.median * 1e3:7.3f} ms (cached between filter and prioritize)"
    )
    print(f"    evaluate, filters only      {evaluate_f.median * 1e3:7.3f} ms")
    print(f"    evaluate, filters + scores  {evaluate_p.median * 1e3:7.3f} ms")
    print(f"    JSON of a 500-host answer   {response.median * 1e3:7.3f} ms")
    return results


def _normal_body(names: list[str], i: int = 0) -> bytes:
    """A nodeCacheCapable filter/prioritize body for pod h<i> over `names`."""
    return orjson.dumps(
        {
            "Pod": dict(
                _pod(f"h{i}", "schedweb"),
                metadata={
                    "name": f"h{i}",
                    "namespace": "default",
                    "uid": f"hu{i}",
                    "resourceVersion": "1",
                },
            ),
            "Nodes": None,
            "NodeNames": names,
        }
    )


def _plain_listener(stack, workdir: Path):
    """A second extender listener, plain HTTP on loopback, over the stack's Redis and database."""
    from tests.harness.processes import ManagedProcess, free_ports

    (port,) = free_ports(count=1)
    env = {k: v for k, v in stack.env.items() if "_TLS_" not in k and "CLIENT_CA" not in k}
    env |= {"SCHEDWEB_EXTENDER_PORT": str(port)}
    process = ManagedProcess(
        name="extender-plain",
        argv=[Path(stack.env["PATH"].split(":")[0]) / "python", "-m", "schedweb.extender_server"],
        log_path=workdir / "extender-plain.log",
        env=env,
        cwd=Path(__file__).resolve().parents[1],
    )
    process.start()

    def healthy() -> bool:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            connection.request("GET", "/healthz")
            return connection.getresponse().status == 200
        finally:
            connection.close()

    process.wait_ready(check=healthy, timeout=60, what="the plain listener's /healthz")
    return process, port


def _http_latency(port: int, names: list[str], *, context=None, label: str) -> dict[str, float]:
    """Sequential keep-alive client against uvicorn: what kube-scheduler sees, minus Go."""
    if context is None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    else:
        connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    bodies = [_normal_body(names, i) for i in range(50)]
    results = {}
    print(f"== extender over {label} (uvicorn, sequential keep-alive client, {len(names)} names)")
    for verb in ("filter", "prioritize"):

        def call(i: int, verb=verb) -> None:
            connection.request(
                "POST",
                f"/extender/{verb}",
                bodies[i % len(bodies)],
                {"Content-Type": "application/json"},
            )
            response = connection.getresponse()
            response.read()
            assert response.status == 200, response.status

        timing = measure(call, runs=400, warmup=20)
        print(f"  {verb:10s} {timing.ms()}")
        key = "http" if context is None else "https"
        results[f"{key}_{verb}_median_ms"] = timing.median * 1e3
        results[f"{key}_{verb}_p99_ms"] = timing.p99 * 1e3
    connection.close()
    return results


class _BindWatch:
    """Times the binds of one run's pods from a watch on kube-apiserver.

    Earlier versions polled kube-scheduler's /metrics every 50 ms over a new TLS connection
    each time. Its CPU profile showed that serving those scrapes took about a tenth of the
    scheduler's CPU, and more the longer a run took, so it penalised the slower configuration.
    A watch, parsed with orjson, costs the same small amount per pod in both runs. Like any
    watch client it resumes from the last resourceVersion when the server ends the stream (it
    closes watchers that fall behind).
    """

    def __init__(self, plane, selector: str, expected: int) -> None:
        import ssl
        import threading

        host, port = plane.url.removeprefix("https://").rsplit(":", 1)
        self._address = (host, int(port))
        self._tls = ssl.create_default_context(cafile=str(plane.ca_file))
        self._token = plane.admin_token
        self._selector = selector
        self._connection: http.client.HTTPSConnection | None = None
        self.expected = expected
        self.bound: set[str] = set()
        self.first: float | None = None
        self.last: float | None = None
        self.error = ""
        self.done = threading.Event()
        self._stopping = False
        self._response = self._open("")
        threading.Thread(target=self._read, daemon=True).start()

    def _open(self, resource_version: str) -> http.client.HTTPResponse:
        import urllib.parse

        self._connection = http.client.HTTPSConnection(*self._address, context=self._tls)
        query = {"watch": "1", "labelSelector": self._selector}
        if resource_version:
            query["resourceVersion"] = resource_version
        self._connection.request(
            "GET",
            f"/api/v1/namespaces/default/pods?{urllib.parse.urlencode(query)}",
            headers={"Authorization": f"Bearer {self._token}"},
        )
        response = self._connection.getresponse()
        if response.status != 200:
            raise RuntimeError(f"watch: HTTP {response.status}")
        return response

    def _read(self) -> None:
        resource_version = ""
        reconnects = 0
        try:
            while len(self.bound) < self.expected and not self._stopping:
                line = self._response.readline()
                if not line:
                    reconnects += 1
                    if reconnects > 20:
                        self.error = "the watch ended 20 times"
                        return
                    self._response = self._open(resource_version)
                    continue
                event = orjson.loads(line)
                pod = event.get("object", {})
                if event.get("type") == "ERROR":
                    self.error = f"watch error: {pod.get('message')}"
                    return
                resource_version = pod.get("metadata", {}).get("resourceVersion", "")
                if pod.get("spec", {}).get("nodeName"):
                    now = time.monotonic()
                    name = pod["metadata"]["name"]
                    if name not in self.bound:
                        self.bound.add(name)
                        self.first = self.first or now
                        self.last = now
        except Exception as exc:  # reported by _throughput
            self.error = repr(exc)
        finally:
            self.done.set()

    def close(self) -> None:
        self._stopping = True
        if self._connection is not None:
            self._connection.close()


def _throughput(plane, config: str, scheduler_name: str, label: str, run: int) -> float:
    """Pods per second for PODS pods created beforehand, from the first bind to the last."""
    from tests.harness import resources

    tag = f"{scheduler_name}-{run}"
    for i in range(PODS):
        manifest = _pod(f"{tag}-{i:04d}", scheduler_name)
        manifest["metadata"]["labels"]["run"] = tag
        resources.pod_create(api=plane.api, manifest=manifest)
    watch = _BindWatch(plane, f"run={tag}", PODS)
    process = plane.start_scheduler(config)
    try:
        if not watch.done.wait(600) or len(watch.bound) < PODS:
            raise RuntimeError(
                f"{label}: only {len(watch.bound)} of {PODS} pods bound ({watch.error})"
            )
    finally:
        process.stop()
        watch.close()
    assert watch.first is not None and watch.last is not None
    elapsed = watch.last - watch.first
    rate = PODS / elapsed
    print(f"  {label:26s} {PODS} pods in {elapsed:6.2f} s = {rate:7.1f} pods/s")
    return rate


def run() -> dict[str, float]:
    import yaml

    from tests.e2e.stack import RedisServer, SchedwebStack
    from tests.harness import resources
    from tests.harness.binaries import BinariesMissing, binaries_find
    from tests.harness.controlplane import ControlPlane

    results = _service_latency(POLICY)
    try:
        binaries_find()
    except BinariesMissing as exc:
        print(f"== kube-scheduler throughput: skipped ({exc})")
        return results
    workdir = Path(tempfile.mkdtemp(prefix="schedweb-bench-"))
    with ControlPlane(workdir / "plane") as plane:
        names = [f"bench-node-{i:03d}" for i in range(NODES)]
        zones = ["zone-a", "zone-b", "zone-c"]
        for i, name in enumerate(names):
            labels = {"topology.kubernetes.io/zone": zones[i % 3]}
            resources.node_create(
                api=plane.api,
                manifest=resources.node_manifest(
                    name=name, cpu="32", memory="128Gi", labels=labels
                ),
            )
        redis = RedisServer(workdir / "redis").start()
        # The extender's listener as `make run` starts it (mutual TLS), and a plain-HTTP one on
        # loopback beside it for the comparison (and numbers comparable with earlier runs).
        stack = SchedwebStack(
            workdir / "stack", kubeconfig=plane.kubeconfig, redis=redis, tls="mtls"
        )
        plain_listener = None
        try:
            stack.start()
            plain_listener, plain_port = _plain_listener(stack, workdir)
            policy = yaml.safe_load(POLICY)
            policy["schedulerNames"] = ["schedweb", "bench-ext", "bench-tls"]
            version = stack.publish(yaml.safe_dump(policy, sort_keys=False), "bench")
            stack.wait_serving("bench-2-3", version)
            results |= _http_latency(plain_port, names, label="plain HTTP")
            results |= _http_latency(
                stack.extender_port, names, context=stack.ssl_context(), label="mutual TLS"
            )
            print(
                f"== kube-scheduler throughput: {PODS} pods over {NODES} nodes (pods created first)"
            )
            # Both schedulers get the same client QPS: the default (50/s) would cap both at the
            # API client, not at scheduling, and hide the extender's cost.
            client = {"qps": 1000, "burst": 1000}
            plain = yaml.safe_dump(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": client,
                    "profiles": [{"schedulerName": "bench-noext"}],
                }
            )
            config = yaml.safe_load(
                stack.scheduler_config(
                    "--scheduler-name",
                    "bench-ext",
                    "--no-preempt",
                    "--second-scheduler",
                    "--url",  # the last --url wins: the plain listener
                    f"http://127.0.0.1:{plain_port}/extender/",
                )
            )
            config["clientConnection"].update(client)
            # Over mutual TLS as `make run` configures it: https, tlsConfig with the local CA and
            # kube-scheduler's client certificate (from the stack's settings, as the CLI does).
            tls_config = yaml.safe_load(
                stack.scheduler_config(
                    "--scheduler-name", "bench-tls", "--no-preempt", "--second-scheduler"
                )
            )
            tls_config["clientConnection"].update(client)
            assert set(tls_config["extenders"][0]["tlsConfig"]) == {"caFile", "certFile", "keyFile"}
            time.sleep(1.5)  # the extender's workers write their counts every second
            before = stack.extender_request("GET", "/metrics")[1]
            rounds = []
            for run in range(1, ROUNDS + 1):
                # The order turns each round so that neither extender run always follows the
                # other (this machine's speed drifts over minutes).
                runs = {
                    "without": lambda run=run: _throughput(
                        plane, plain, "bench-noext", "without an extender", run
                    ),
                    "plain": lambda run=run: _throughput(
                        plane, yaml.safe_dump(config), "bench-ext", "with schedweb, plain HTTP", run
                    ),
                    "tls": lambda run=run: _throughput(
                        plane,
                        yaml.safe_dump(tls_config),
                        "bench-tls",
                        "with schedweb, mutual TLS",
                        run,
                    ),
                }
                order = ["without", "plain", "tls"] if run % 2 else ["without", "tls", "plain"]
                rates = {name: runs[name]() for name in order}
                rounds.append(rates)
                print(
                    f"  round {run}: with/without {rates['plain'] / rates['without']:.2f} (plain),"
                    f" {rates['tls'] / rates['without']:.2f} (TLS);"
                    f" TLS/plain {rates['tls'] / rates['plain']:.2f}"
                )
            ratio = statistics.median(r["plain"] / r["without"] for r in rounds)
            tls_ratio = statistics.median(r["tls"] / r["without"] for r in rounds)
            tls_vs_plain = statistics.median(r["tls"] / r["plain"] for r in rounds)
            print(
                f"  ratio with/without, median of {ROUNDS} rounds: {ratio:.2f} plain HTTP,"
                f" {tls_ratio:.2f} mutual TLS"
                " (target at least 0.3, aim 0.5; published Go extender: 0.11)"
            )
            print(
                f"  throughput, medians: plain HTTP"
                f" {statistics.median(r['plain'] for r in rounds):.1f} pods/s,"
                f" mutual TLS {statistics.median(r['tls'] for r in rounds):.1f} pods/s;"
                f" TLS/plain {tls_vs_plain:.2f} (target at least 0.90:"
                f" {'PASS' if tls_vs_plain >= 0.9 else 'FAIL'})"
            )
            time.sleep(1.5)
            after = stack.extender_request("GET", "/metrics")[1]
            results |= {
                "throughput_without": statistics.median(r["without"] for r in rounds),
                "throughput_with": statistics.median(r["plain"] for r in rounds),
                "throughput_with_tls": statistics.median(r["tls"] for r in rounds),
                "throughput_ratio": ratio,
                "throughput_ratio_tls": tls_ratio,
                "throughput_tls_vs_plain": tls_vs_plain,
            }
            results |= _server_side_from_metrics(
                before if isinstance(before, str) else "", after if isinstance(after, str) else ""
            )
            results |= hostile_load(
                port=stack.extender_port,
                tls_dir=stack.tls_dir,
                normal_body=_normal_body(names),
                hostile_pod=dict(
                    _pod("hostile", "schedweb"),
                    metadata={"name": "hostile", "namespace": "default", "uid": "hostile-uid"},
                ),
            )
        finally:
            if plain_listener is not None:
                plain_listener.stop(grace=5)
            stack.stop()
            redis.stop()
    return results


def _histogram(text: str) -> dict[str, list[tuple[float, float]]]:
    """verb -> [(bucket upper bound, cumulative count)] from the extender's /metrics text."""
    buckets: dict[str, list[tuple[float, float]]] = {}
    for line in text.splitlines():
        if line.startswith("schedweb_extender_request_duration_seconds_bucket"):
            labels, value = line.rsplit(" ", 1)
            verb = labels.split('verb="')[1].split('"')[0]
            bound = labels.split('le="')[1].split('"')[0]
            buckets.setdefault(verb, []).append(
                (float("inf") if bound == "+Inf" else float(bound), float(value))
            )
    return buckets


def _server_side_from_metrics(before: str, after: str) -> dict[str, float]:
    """Median and p99 bucket bounds of the extender's own latency histogram during the
    throughput run only (the difference of two scrapes)."""
    start, end = _histogram(before), _histogram(after)
    results: dict[str, float] = {}
    if not end:
        return results
    print("  extender latency during the run (server side, its histogram; bucket upper bounds):")
    for verb, points in sorted(end.items()):
        earlier = dict(start.get(verb, []))
        points = [(bound, count - earlier.get(bound, 0.0)) for bound, count in points]
        total = points[-1][1]
        if not total:
            continue
        p50 = next(b for b, c in points if c >= 0.5 * total)
        p99 = next(b for b, c in points if c >= 0.99 * total)
        print(f"    {verb:10s} n={total:.0f}  median <= {p50 * 1e3:g} ms  p99 <= {p99 * 1e3:g} ms")
        results[f"server_{verb}_median_le_ms"] = p50 * 1e3
        results[f"server_{verb}_p99_le_ms"] = p99 * 1e3
    return results


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
