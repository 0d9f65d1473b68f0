"""Bind places a pod only where kube-scheduler could have (issue 27), and every refusal looks
the same on the wire, headers included.

A legitimate bind caller could place a targeted pod on a NoSchedule-tainted node, on a node the
policy rejects and in kube-system, and refusals told apart targeted pods from others by their
X-Schedweb-Policy header. The snapshot is the demo cluster's (cp-1 and a-spot-1 tainted
NoSchedule, worker-medium-b-3 cordoned) with a few pods added; the binder records its calls."""

from __future__ import annotations

import copy

import orjson
import pytest

from policies.cluster.demo import demo_objects
from policies.cluster.loaded import LoadedCluster
from policies.cluster.state import ClusterState
from policies.extender.runtime import runtime
from policies.extender.service import BIND_REFUSED
from tests.asgiclient import extender_post
from tests.builders import make_pod

from .conftest import example

pytestmark = pytest.mark.django_db

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _pods() -> list[dict]:
    """Pending pods schedweb's seed-003 policy (names of at most 4 characters) targets."""
    return [
        make_pod("ok", uid="u-ok"),
        make_pod("gpu", uid="u-gpu", tolerations=[GPU_TOLERATION]),
        make_pod("zone", uid="u-zone", nodeSelector={"topology.kubernetes.io/zone": "zone-b"}),
        make_pod("longname", uid="u-long"),  # seed-003's filter rejects it everywhere
        make_pod("sys", namespace="kube-system", uid="u-sys"),
        make_pod("othr", uid="u-other", scheduler_name="default-scheduler"),
        make_pod("done", uid="u-done", node_name="b-small-1"),
    ]


def _serve(publish, monkeypatch, *, lean: bool = False) -> list[tuple[str, str]]:
    """seed-003 published, the demo snapshot with _pods() (`lean`: as an extender process holds
    it, bound pods' objects cut), and the binder's calls."""
    publish(example("seed-003-name-length"))
    nodes, pods = (copy.deepcopy(objects) for objects in demo_objects()[:2])
    state = ClusterState.from_objects(nodes, pods + _pods())
    if lean:
        state = ClusterState.from_bytes(state.to_bytes(), lean=True)
    state = state.freeze()
    snapshot = LoadedCluster(state, "live", "test", version=1)
    extender = runtime().extender
    monkeypatch.setattr(extender, "_snapshot", lambda: snapshot)
    bound: list[tuple[str, str]] = []
    monkeypatch.setattr(extender, "_binder", lambda args: bound.append((args.pod_uid, args.node)))
    return bound


@pytest.fixture(params=[False, True], ids=["full", "lean"])
def binding(publish, monkeypatch, request):
    return _serve(publish, monkeypatch, lean=request.param)


def _bind(name: str, node: str, *, namespace: str = "default", uid: str = ""):
    body = {
        "PodName": name,
        "PodNamespace": namespace,
        "PodUID": uid or f"u-{name}",
        "Node": node,
    }
    return extender_post("bind", orjson.dumps(body))


def test_a_pod_is_bound_where_kube_scheduler_could_place_it(binding):
    response = _bind("ok", "a-small-1")
    assert response.json() == {"Error": ""}
    assert response["X-Schedweb-Policy"] == "seed-003-name-length/v1"
    response = _bind("gpu", "a-gpu-1")  # tolerates the GPU nodes' NoSchedule taint
    assert response.json() == {"Error": ""}
    assert _bind("zone", "b-small-1").json() == {"Error": ""}  # its nodeSelector matches
    assert _bind("done", "b-small-1", uid="u-done").json() == {"Error": ""}  # a retried bind
    assert binding == [("u-ok", "a-small-1"), ("u-gpu", "a-gpu-1"), ("u-zone", "b-small-1")]


REFUSED = {
    "a NoSchedule taint the pod does not tolerate": ("ok", "cp-1", {}),
    "another NoSchedule taint": ("ok", "a-spot-1", {}),
    "a cordoned node": ("ok", "worker-medium-b-3", {}),
    "a node outside the pod's nodeSelector": ("zone", "a-small-1", {}),
    "a node the policy rejects": ("longname", "a-small-1", {"uid": "u-long"}),
    "an excluded namespace": ("sys", "a-small-1", {"namespace": "kube-system"}),
    "another scheduler's pod": ("othr", "a-small-1", {"uid": "u-other"}),
    "a uid no pod has": ("ok", "a-small-1", {"uid": "not-a-pod"}),
    "the uid of another pod": ("ok", "a-small-1", {"uid": "u-gpu"}),
    "a node the snapshot lacks": ("ok", "no-such-node", {}),
    "a pod bound elsewhere": ("done", "a-small-1", {"uid": "u-done"}),
}


@pytest.mark.parametrize("case", list(REFUSED), ids=list(REFUSED))
def test_bind_refuses_what_kube_scheduler_would_not_do(binding, case):
    name, node, extra = REFUSED[case]
    response = _bind(name, node, **extra)
    assert response.json() == {"Error": BIND_REFUSED}
    assert binding == []


def test_every_refusal_is_the_same_answer_headers_included(binding):
    """Status, headers (X-Schedweb-Policy included) and body: nothing says whether the uid
    belongs to a pod a policy targets, or which check refused it."""
    answers = {case: _bind(name, node, **extra) for case, (name, node, extra) in REFUSED.items()}
    first = next(iter(answers.values()))
    for case, response in answers.items():
        assert (response.status_code, response.headers, response.content) == (
            first.status_code,
            first.headers,
            first.content,
        ), case
    assert first.headers.get("x-schedweb-policy") == "none"


def test_the_excluded_namespaces_are_a_setting(publish, settings, monkeypatch):
    from policies.extender.runtime import reset_runtime

    settings.SCHEDWEB_EXTENDER_BIND_EXCLUDED_NAMESPACES = ["default"]
    reset_runtime()  # the extender reads the setting when it is made
    bound = _serve(publish, monkeypatch)
    assert _bind("ok", "a-small-1").json() == {"Error": BIND_REFUSED}
    assert _bind("sys", "a-small-1", namespace="kube-system").json() == {"Error": ""}
    assert bound == [("u-sys", "a-small-1")]


def test_refused_binds_are_not_counted_under_a_policy(binding):
    from policies.extender.entry import metrics_text

    _bind("longname", "a-small-1", uid="u-long")  # a targeted pod, refused by the policy
    text = metrics_text().decode()
    assert 'verb="bind"' in text
    assert (
        'schedweb_extender_decisions_total{policy="seed-003-name-length",version="1",verb="bind"}'
        not in text
    )


def test_bind_checks_under_the_serve_lock_and_calls_the_api_server_outside_it(publish, monkeypatch):
    """The snapshot changes in place under the runtime's serve lock (issue 24): bind's checks
    read it holding the lock, and its call to the API server does not hold every other
    request up."""
    _serve(publish, monkeypatch)
    state = runtime()
    extender = state.extender
    snapshot = extender._snapshot
    seen: list[tuple[str, bool]] = []

    def snapshot_seen():
        seen.append(("snapshot", state.serve_lock.locked()))
        return snapshot()

    monkeypatch.setattr(extender, "_snapshot", snapshot_seen)
    monkeypatch.setattr(
        extender, "_binder", lambda args: seen.append(("binder", state.serve_lock.locked()))
    )
    assert _bind("ok", "a-small-1").json() == {"Error": ""}
    assert seen == [("snapshot", True), ("binder", False)]
