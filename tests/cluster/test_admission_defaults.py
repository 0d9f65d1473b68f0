"""A pod given as text is judged as the API server stores it (admission_defaults.pod_admit):
what defaulting and admission add, that it is idempotent, and that the model's verdict follows.
The real API server's answer for the same pods is checked by tests/schedmodel/
test_differential.py (person-written pods)."""

from __future__ import annotations

import copy

import yaml

from policies.cluster.admission_defaults import pod_admit
from policies.cluster.manifest import pod_view_from_text
from policies.cluster.state import ClusterState
from policies.schedmodel.pipeline import cycle_run
from tests.builders import make_node

WRITTEN = """
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web, rev: r1}}
spec:
  hostNetwork: true
  containers:
  - name: c
    image: nginx
    resources: {limits: {cpu: 500m, memory: 256Mi}}
    ports: [{containerPort: 8080}]
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {app: web}}
        matchLabelKeys: [rev]
        mismatchLabelKeys: [app]
        topologyKey: kubernetes.io/hostname
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
    labelSelector: {matchLabels: {app: web}}
    matchLabelKeys: [rev]
"""


def test_a_written_pod_gains_what_the_api_server_adds_and_says_what():
    obj = yaml.safe_load(WRITTEN)
    before = copy.deepcopy(obj)
    stored, added = pod_admit(obj)
    assert obj == before  # the input is not modified
    spec = stored["spec"]
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "256Mi"}
    assert spec["containers"][0]["ports"][0]["hostPort"] == 8080
    term = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term[0]["labelSelector"]["matchExpressions"] == [
        {"key": "rev", "operator": "In", "values": ["r1"]},
        {"key": "app", "operator": "NotIn", "values": ["web"]},
    ]
    assert spec["topologySpreadConstraints"][0]["labelSelector"]["matchExpressions"] == [
        {"key": "rev", "operator": "In", "values": ["r1"]}
    ]
    assert spec["tolerations"] == [
        {
            "key": key,
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        }
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
    ]
    assert added == [
        "spec.containers[0].resources.requests.cpu: 500m (its limit)",
        "spec.containers[0].resources.requests.memory: 256Mi (its limit)",
        "spec.containers[0].ports[0].hostPort: 8080 (hostNetwork)",
        "spec.affinity.podAntiAffinity.required[0].labelSelector: rev In (r1)",
        "spec.affinity.podAntiAffinity.required[0].labelSelector: app NotIn (web)",
        "spec.topologySpreadConstraints[0].labelSelector: rev In (r1)",
        "spec.tolerations: node.kubernetes.io/not-ready:NoExecute for 300s",
        "spec.tolerations: node.kubernetes.io/unreachable:NoExecute for 300s",
    ]


def test_a_stored_pod_gains_nothing_the_second_time():
    stored, _ = pod_admit(yaml.safe_load(WRITTEN))
    again, added = pod_admit(stored)
    assert added == [] and again == stored


def test_a_toleration_of_every_noexecute_taint_covers_the_defaults():
    obj = yaml.safe_load(WRITTEN)
    obj["spec"]["tolerations"] = [{"operator": "Exists", "effect": "NoExecute"}]
    stored, added = pod_admit(obj)
    assert stored["spec"]["tolerations"] == obj["spec"]["tolerations"]
    assert not [a for a in added if a.startswith("spec.tolerations")]
    # a NoSchedule-only toleration of not-ready does not cover the NoExecute default
    obj["spec"]["tolerations"] = [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert len(pod_admit(obj)[0]["spec"]["tolerations"]) == 3


def test_pod_level_limits_default_pod_level_requests_from_the_containers_first():
    obj = {
        "metadata": {"name": "p"},
        "spec": {
            "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "250m"}}},
                {"name": "b", "resources": {"requests": {"cpu": "250m"}}},
            ],
        },
    }
    stored, added = pod_admit(obj)
    # cpu: the containers' 500m (not the 2-cpu limit); memory: no container asks, the limit
    assert stored["spec"]["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}
    assert [a for a in added if a.startswith("spec.resources")] == [
        "spec.resources.requests.cpu: 500m (the containers' requests)",
        "spec.resources.requests.memory: 1Gi (its limit)",
    ]


def test_a_malformed_pod_is_left_to_the_conversion_to_report():
    obj = {"metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"limits": "x"}}]}}
    stored, added = pod_admit(obj)
    assert stored["spec"]["containers"] == obj["spec"]["containers"]
    assert not [a for a in added if "resources" in a]
    bad = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"resources": {"limits": {"cpu": "x"}}}]},
    }
    assert pod_admit(bad)[1][0] == "spec.containers[0].resources.requests.cpu: x (its limit)"
    assert pod_admit({"metadata": {"name": "p"}, "spec": "nope"}) == (
        {"metadata": {"name": "p"}, "spec": "nope"},
        [],
    )


def test_a_pasted_pod_depending_on_the_defaults_gets_the_stored_pods_verdict():
    # a NotReady node carries not-ready:NoExecute (and NoSchedule, tolerated here): as written
    # the pod does not tolerate NoExecute; as stored it does (the 300 s default)
    text = """
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  tolerations: [{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoSchedule}]
  containers: [{name: c, image: nginx}]
"""
    node = make_node(
        "n",
        taints=[
            {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
        ],
    )
    state = ClusterState.from_objects([node], []).freeze()
    pod = pod_view_from_text(text)
    assert pod["admitted"] == [
        "spec.tolerations: node.kubernetes.io/not-ready:NoExecute for 300s",
        "spec.tolerations: node.kubernetes.io/unreachable:NoExecute for 300s",
    ]
    cycle = cycle_run(pod=pod, nodes=state.nodes(), state=state)
    assert cycle.pick == ["n"]
    assert cycle.to_dict()["admissionDefaults"] == pod["admitted"]
