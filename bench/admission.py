"""The queue webhook's latency (issue 11): one AdmissionReview of a new pod answered with its
PriorityClass, priority, preemptionPolicy and Workload link, with 5000 pending pods in the
snapshot, measured in one run on this machine:

1. the answer in process (policies/admission/review.py): parse, pod view, queue key and gang
   evaluated, patch written;
2. the same requests over HTTPS with mutual TLS to the extender's listener as shipped
   (`python -m schedweb.extender_server`, file source holding the 5000 pending pods, policies
   and PriorityClass ranges in Redis), a sequential keep-alive client, as kube-apiserver calls it.

Needs redis-server and openssl (scripts/extender-certs.sh).
"""

from __future__ import annotations

import http.client
import ssl
import tempfile
from pathlib import Path

import orjson

from .stats import measure

ROOT = Path(__file__).resolve().parents[1]
PENDING = 5000
NODES = 500
POLICY = (ROOT / "policies/examples/seed-002.yaml").read_text()
RUNS = 2000


def _cluster() -> tuple[list[dict], list[dict], list[dict]]:
    """500 nodes, 5000 pending pods, and the Namespaces (with labels), ReplicaSets and
    Services of the generated cluster, as raw API JSON with kinds."""
    from policies.cluster.demo import generate_cluster, generate_cluster_objects

    nodes, pods = generate_cluster(NODES, PENDING + PENDING // 10, seed=11)  # ~2% Succeeded
    pods = [p for p in pods if p["status"].get("phase") != "Succeeded"][:PENDING]
    for pod in pods:
        pod["spec"].pop("nodeName", None)
        pod["status"] = {"phase": "Pending"}
    return nodes, pods, generate_cluster_objects(pods)


def _review(i: int, namespaces: list[str]) -> bytes:
    """A CREATE review of pod i: groupPriority, QoS and gang labels vary with i."""
    resources = {"cpu": "100m", "memory": "64Mi"}
    container = {"name": "c", "image": "x", "resources": {"requests": resources}}
    if i % 3 == 0:
        container["resources"]["limits"] = resources
    labels = {"app": f"a{i % 50}", "groupPriority": str(i % 10)}
    if i % 4 == 0:
        labels |= {"podGroup": f"g{i % 40}", "minAvailable": "4"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": f"bench-{i}-", "labels": labels},
        "spec": {"schedulerName": "schedweb", "containers": [container], "priority": 0},
    }
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": f"uid-{i}",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "namespace": namespaces[i % len(namespaces)],
                "operation": "CREATE",
                "object": pod,
            },
        }
    )


def _in_process(nodes: list[dict], pods: list[dict], others: list[dict]) -> dict[str, float]:
    from policies.admission.review import admission_answer
    from policies.cluster.state import ClusterState
    from policies.engine.policy import compile_policy
    from policies.extender.service import ServedPolicy

    state = ClusterState.from_objects(nodes, pods, others).freeze()
    pending = sum(1 for p in state.pods() if not p["nodeName"])
    namespaces = sorted(state.namespaces())
    served = ServedPolicy("seed-002", 1, compile_policy(POLICY))
    bodies = [_review(i, namespaces) for i in range(200)]

    def call(i: int) -> None:
        answer = admission_answer(
            bodies[i % len(bodies)],
            policies={"schedweb": served},
            namespace_labels=state.namespaces().get,
            class_ready=lambda value: True,
            gang_mode="workload",
        )
        assert answer.status == 200

    timing = measure(call, runs=RUNS, warmup=50)
    print(f"== queue webhook in process ({pending} pending pods in the snapshot)")
    print(f"  admission  {timing.ms()}")
    return {
        "webhook_service_median_ms": timing.median * 1e3,
        "webhook_service_p99_ms": timing.p99 * 1e3,
    }


def _over_https(objects: list[dict], workdir: Path) -> dict[str, float]:
    from policies.gangs import MODE_KEY
    from policies.queue_classes import CLASSES_KEY

    from .listener import bench_listener

    # the published policy and the PriorityClass ranges, as the worker writes them
    written = {
        CLASSES_KEY: orjson.dumps([[0, 29]]),
        MODE_KEY: orjson.dumps({"mode": "workload", "reason": "bench", "checkedAt": 0}),
    }
    with bench_listener(
        workdir, objects=objects, policies={"seed-002": POLICY}, redis_values=written
    ) as (port, tls, listener):
        context = ssl.create_default_context(cafile=str(tls / "ca.crt"))
        # kube-apiserver's webhook client certificate: the only one /admission/queue accepts
        context.load_cert_chain(tls / "webhook.crt", tls / "webhook.key")

        def healthy() -> bool:
            connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=2, context=context)
            try:
                connection.request("GET", "/healthz")
                return connection.getresponse().status == 200
            finally:
                connection.close()

        listener.wait_ready(check=healthy, timeout=60, what="the listener's /healthz")
        connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=context)
        namespaces = sorted(
            {o["metadata"]["name"] for o in objects if o.get("kind") == "Namespace"}
        )
        bodies = [_review(i, namespaces) for i in range(200)]

        def call(i: int) -> None:
            connection.request(
                "POST",
                "/admission/queue",
                bodies[i % len(bodies)],
                {"Content-Type": "application/json"},
            )
            response = connection.getresponse()
            answer = orjson.loads(response.read())
            assert response.status == 200 and answer["response"].get("patch"), answer

        timing = measure(call, runs=RUNS, warmup=50)  # the first answers build the runtime
        connection.close()
        print(f"== queue webhook over HTTPS, mutual TLS ({PENDING} pending pods, keep-alive)")
        print(f"  admission  {timing.ms()}")
        return {
            "webhook_https_median_ms": timing.median * 1e3,
            "webhook_https_p99_ms": timing.p99 * 1e3,
        }


def run() -> dict[str, float]:
    nodes, pods, others = _cluster()
    results = _in_process(nodes, pods, others)
    objects = nodes + pods + others
    with tempfile.TemporaryDirectory(prefix="schedweb-bench-webhook-") as workdir:
        results |= _over_https(objects, Path(workdir))
    return results
