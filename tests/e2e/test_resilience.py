"""The extender cannot take scheduling down: killed, restarted, Redis gone, binds repeated.

Own control plane and stack (module fixtures), kube-scheduler configured with `ignorable: true`.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from tests.harness import resources

from .conftest import create_pod, make_nodes, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
# Bind enabled (the bind tests below); only kube-scheduler's client certificate reaches it.
STACK_ENV = {"SCHEDWEB_EXTENDER_BIND": "1"}

POLICY = """\
name: resilient
schedulerNames: [schedweb]
filters:
  - name: enough-cpu
    expression: node.allocatable.cpu - node.requested.cpu >= pod.requests.cpu
scores:
  - name: free-cpu
    expression: (node.allocatable.cpu - node.requested.cpu) * 100 / node.allocatable.cpu
"""


@pytest.fixture(scope="module")
def nodes(plane) -> list[str]:
    names = [f"res-{i:02d}" for i in range(20)]
    make_nodes(plane.api, names, cpu="32", memory="64Gi")
    return names


def scheduled_events(api, namespace: str = "default") -> dict[str, int]:
    """Pod name -> how many times kube-scheduler reported binding it."""
    listed = api.get(f"/api/v1/namespaces/{namespace}/events?fieldSelector=reason%3DScheduled")
    counts: dict[str, int] = {}
    for event in listed.get("items", []):
        name = event["involvedObject"]["name"]
        counts[name] = counts.get(name, 0) + int(event.get("count") or 1)
    return counts


def test_200_pods_all_land_once_while_the_extender_is_killed_and_redis_stops(
    plane, stack, redis_server, nodes
):
    version = stack.publish(POLICY, "resilience")
    stack.wait_serving("resilient", version)
    config = stack.scheduler_config(
        "--scheduler-name", "schedweb", "--ignorable", "--timeout", "1s", "--no-bind"
    )
    scheduler = plane.start_scheduler(config)
    names = [f"res-pod-{i:03d}" for i in range(200)]
    created: list[str] = []

    def create_all() -> None:
        for name in names:
            create_pod(plane.api, name, cpu="50m")
            created.append(name)
            time.sleep(0.08)  # ~16 s of arrivals or more: the disruptions below pace with them

    creator = threading.Thread(target=create_all)
    try:
        creator.start()
        # These sleeps only pace the disruptions among the arrivals; nothing below depends on
        # where they fall (every pod must land once however the two interleave).
        time.sleep(3)
        os.killpg(stack.extender.pid, signal.SIGKILL)  # the extender dies without warning
        stack.extender.stop()  # reap it
        time.sleep(2)
        stack.start_extender(wait_for_snapshot=False)  # back, serving from what it can load
        time.sleep(2)
        port = redis_server.port
        redis_server.stop()  # Redis gone: the extender keeps serving from memory
        time.sleep(3)
        redis_server.__init__(redis_server.workdir, port)  # same port, empty data
        redis_server.start()
        creator.join(600)  # creating 200 pods takes ~16 s, far more on a loaded machine
        assert len(created) == 200

        def all_bound() -> bool:
            pods = plane.api.get("/api/v1/namespaces/default/pods?labelSelector=")["items"]
            bound = {p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")}
            return set(names) <= bound

        wait_until(all_bound, timeout=300, interval=1, what="all 200 pods bound")
    finally:
        creator.join(600)
        scheduler.stop()
    counts = scheduled_events(plane.api)
    twice = {name: n for name, n in counts.items() if name in names and n != 1}
    assert twice == {}, f"pods bound more than once: {twice}"
    # the extender recovers by itself: it answers for the policy again (Redis repaired by beat
    # or loaded from the database at its restart)
    assert stack.extender_request("GET", "/readyz")[0] == 200


def test_bind_creates_the_binding_and_is_idempotent(plane, stack, nodes):
    # bind is for pods an active policy targets
    version = stack.publish(POLICY.replace("free-cpu", "free-cpu-bind"), "bind")
    stack.wait_serving("resilient", version)
    create_pod(plane.api, "bind-me")
    pod = resources.pod_get(api=plane.api, name="bind-me")
    body = {
        "PodName": "bind-me",
        "PodNamespace": "default",
        "PodUID": pod["metadata"]["uid"],
        "Node": "res-03",
    }

    def bound() -> bool:  # once the snapshot holds the new pod
        return stack.extender_request("POST", "/extender/bind", body) == (200, {"Error": ""})

    wait_until(bound, timeout=60, interval=0.2, what="the extender's bind of bind-me")
    # the scheduler may retry a bind whose answer it did not get
    status, answer = stack.extender_request("POST", "/extender/bind", body)
    assert (status, answer) == (200, {"Error": ""})
    assert resources.pod_get(api=plane.api, name="bind-me")["spec"]["nodeName"] == "res-03"
    status, answer = stack.extender_request("POST", "/extender/bind", {**body, "Node": "res-04"})
    # Refused, in words that name nothing (no pods, nodes or identities to the caller): by the
    # extender when its snapshot already shows the binding, else by the API server (409), which
    # the extender reports without its text. Which one depends on the watch's timing.
    assert status == 200
    assert answer["Error"] in (
        "schedweb refused this binding",
        "schedweb could not bind the pod; see schedweb's log",
    )
    assert resources.pod_get(api=plane.api, name="bind-me")["spec"]["nodeName"] == "res-03"


def test_a_scheduler_with_the_bind_verb_binds_through_the_extender(plane, stack, nodes):
    version = stack.publish(POLICY.replace("free-cpu", "free"), "bind verb")
    stack.wait_serving("resilient", version)
    config = stack.scheduler_config("--scheduler-name", "schedweb", "--bind", "--second-scheduler")
    with plane.start_scheduler(config):
        create_pod(plane.api, "bound-by-extender")
        node = resources.pod_wait_bound(api=plane.api, name="bound-by-extender")
    assert node in nodes

    # the decision was recorded with the node the bind chose
    def decided() -> bool:
        status, body = stack.request("GET", "/api/v1/decisions?pod=bound-by-extender")
        return status == 200 and any(d["chosenNode"] == node for d in body["results"])

    wait_until(decided, timeout=60, interval=0.5, what="the decision with its chosen node")
