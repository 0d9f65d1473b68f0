"""Kubernetes JSON -> engine views: effective requests, quantities, QoS, owners, bad objects."""

from __future__ import annotations

import copy

import pytest

from policies.cluster.convert import ConversionError, node_view, pod_view
from policies.engine.inputs import NodeView, PodView, ResourceMap
from tests.builders import make_container, make_node, make_pod

Mi = 2**20
Gi = 2**30


def c(name: str = "app", restart: str | None = None, **requests: str) -> dict:
    """A container requesting the given resources (cpu="250m")."""
    return make_container(name, requests=requests, restart_policy=restart)


# ---------------------------------------------------------------------------------------------
# effective pod requests (component-helpers PodRequests)

REQUEST_CASES = [
    # (containers, init containers, extra spec, expected cpu millicores)
    pytest.param([c(cpu="250m")], [], {}, 250, id="one container"),
    # 250m + 500m = 750
    pytest.param([c("a", cpu="250m"), c("b", cpu="500m")], [], {}, 750, id="two containers"),
    # 2 containers 250m + 500m, init 1 CPU -> max(750, 1000) = 1000
    pytest.param(
        [c("a", cpu="250m"), c("b", cpu="500m")], [c("init", cpu="1")], {}, 1000,
        id="init container larger than the sum",
    ),
    # init 200m is below the sum 750 -> 750
    pytest.param(
        [c("a", cpu="250m"), c("b", cpu="500m")], [c("init", cpu="200m")], {}, 750,
        id="init container smaller than the sum",
    ),
    # two inits run one after the other: max(750, 1000, 1200) = 1200
    pytest.param(
        [c("a", cpu="750m")], [c("i1", cpu="1"), c("i2", cpu="1200m")], {}, 1200,
        id="largest of several init containers",
    ),
    # sidecar 100m started before init 1 CPU: regular 500 + sidecar 100 = 600;
    # init use = 1000 + 100 (sidecar already running) = 1100 -> max(600, 1100) = 1100
    pytest.param(
        [c(cpu="500m")], [c("mesh", "Always", cpu="100m"), c("init", cpu="1")], {}, 1100,
        id="sidecar before an init container",
    ),
    # init 1 CPU before the sidecar: init use = 1000; sidecar peak 100; regular + sidecar = 600
    # -> max(600, 1000, 100) = 1000
    pytest.param(
        [c(cpu="500m")], [c("init", cpu="1"), c("mesh", "Always", cpu="100m")], {}, 1000,
        id="sidecar after an init container",
    ),
    # sidecars only add up: 500 + 100 + 200 = 800
    pytest.param(
        [c(cpu="500m")], [c("s1", "Always", cpu="100m"), c("s2", "Always", cpu="200m")], {}, 800,
        id="two sidecars",
    ),
    # overhead is added: 250 + 100 = 350
    pytest.param([c(cpu="250m")], [], {"overhead": {"cpu": "100m"}}, 350, id="overhead"),
    # pod-level resources replace the containers' cpu: 1000 instead of 250 + 250
    pytest.param(
        [c("a", cpu="250m"), c("b", cpu="250m")], [], {"resources": {"requests": {"cpu": "1"}}},
        1000, id="pod-level requests",
    ),
    # pod-level limits default the pod-level request: 2000
    pytest.param(
        [c(cpu="250m")], [], {"resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}, 2000,
        id="pod-level limits as request",
    ),
    # pod-level 1 CPU, plus overhead 100m afterwards = 1100
    pytest.param(
        [c(cpu="250m")], [],
        {"resources": {"requests": {"cpu": "1"}}, "overhead": {"cpu": "100m"}}, 1100,
        id="pod-level requests plus overhead",
    ),
    pytest.param([make_container()], [], {}, 0, id="no requests reads 0"),
    pytest.param([], [], {}, 0, id="no containers"),
]  # fmt: skip


@pytest.mark.parametrize(("containers", "inits", "spec", "cpu"), REQUEST_CASES)
def test_it_computes_the_cpu_request_as_kube_scheduler_does(containers, inits, spec, cpu):
    pod = make_pod(containers=containers, init_containers=inits, **spec)
    assert pod_view(pod)["requests"]["cpu"] == cpu


def test_it_always_lists_cpu_and_memory_in_pod_requests():
    requests = pod_view(make_pod(containers=[make_container()]))["requests"]
    assert requests == {"cpu": 0, "memory": 0}
    assert isinstance(requests, ResourceMap)
    assert requests["nvidia_com_gpu"] == 0  # absent resources read as 0


def test_it_keys_extended_resources_with_resource_key():
    view = pod_view(make_pod(requests={"nvidia.com/gpu": "2", "hugepages-2Mi": "4Mi"}))
    # 4Mi of hugepages-2Mi = 4 * 2**20 bytes
    assert view["requests"]["nvidia_com_gpu"] == 2
    assert view["requests"]["hugepages_2Mi"] == 4 * Mi


def test_it_keeps_memory_from_the_containers_when_pod_level_names_only_cpu():
    pod = make_pod(
        containers=[c("a", cpu="250m", memory="64Mi"), c("b", cpu="250m", memory="64Mi")],
        resources={"requests": {"cpu": "1"}},
    )
    requests = pod_view(pod)["requests"]
    # cpu from the pod level (1000); memory 64Mi + 64Mi from the containers
    assert (requests["cpu"], requests["memory"]) == (1000, 128 * Mi)


def test_it_ignores_pod_level_resources_kube_scheduler_does_not_support():
    pod = make_pod(cpu="250m", resources={"requests": {"ephemeral-storage": "10Gi"}})
    assert "ephemeral_storage" not in pod_view(pod)["requests"]


def test_it_defaults_a_container_request_to_its_limit():
    # limits only, as written by hand: the API server would copy them into requests
    pod = make_pod(containers=[make_container(limits={"cpu": "1", "memory": "1Gi"})])
    view = pod_view(pod)
    assert (view["requests"]["cpu"], view["requests"]["memory"]) == (1000, Gi)
    assert view["qosClass"] == "Guaranteed"


LIMIT_CASES = [
    # two containers' limits add: 500 + 1000 = 1500
    pytest.param([make_container("a", limits={"cpu": "500m"}),
                  make_container("b", limits={"cpu": "1"})], [], {}, {"cpu": 1500}, id="sum"),
    # init limit 2 CPU > sum 500 -> 2000
    pytest.param([make_container("a", limits={"cpu": "500m"})],
                 [make_container("i", limits={"cpu": "2"})], {}, {"cpu": 2000}, id="init max"),
    # overhead is added to set limits only: cpu 500 + 100 = 600, memory has no limit -> absent
    pytest.param([make_container("a", limits={"cpu": "500m"})], [],
                 {"overhead": {"cpu": "100m", "memory": "32Mi"}}, {"cpu": 600}, id="overhead"),
    pytest.param([make_container("a", requests={"cpu": "1"})], [], {}, {}, id="no limits"),
]  # fmt: skip


@pytest.mark.parametrize(("containers", "inits", "spec", "limits"), LIMIT_CASES)
def test_it_computes_pod_limits_like_pod_limits(containers, inits, spec, limits):
    pod = make_pod(containers=containers, init_containers=inits, **spec)
    assert pod_view(pod)["limits"] == limits


# ---------------------------------------------------------------------------------------------
# quantities through conversion

QUANTITY_CASES = [
    # (resource, quantity, expected view value)
    ("cpu", "100m", 100),
    ("cpu", "0.5", 500),  # 0.5 core = 500m
    ("cpu", "2", 2000),
    ("cpu", 2, 2000),  # an unquoted YAML number, as the API server accepts it
    ("cpu", 0.25, 250),
    ("cpu", "0.1m", 1),  # rounded up to a whole millicore, as MilliValue() does
    ("cpu", "1e-1", 100),  # 0.1 core in exponent form = 100m
    ("cpu", "250000u", 250),  # micro-cores: 250000u = 250m
    ("memory", "1Gi", Gi),
    ("memory", "1.5Gi", 3 * Gi // 2),  # 1610612736
    ("memory", "128Mi", 128 * Mi),
    ("memory", "1k", 1000),
    ("memory", "2M", 2_000_000),
    ("memory", "1e3", 1000),
    ("memory", "1.5", 2),  # whole bytes, rounded up
    ("memory", "100m", 1),  # 0.1 byte rounds up to 1
    ("memory", "0", 0),
]


@pytest.mark.parametrize(("resource", "quantity", "expected"), QUANTITY_CASES)
def test_it_converts_quantities(resource, quantity, expected):
    assert pod_view(make_pod(requests={resource: quantity}))["requests"][resource] == expected


def test_it_sums_fractions_exactly_before_rounding():
    # 0.4m + 0.4m = 0.8m -> 1m (rounding each first would give 1 + 1 = 2)
    pod = make_pod(containers=[c("a", cpu="0.4m"), c("b", cpu="0.4m")])
    assert pod_view(pod)["requests"]["cpu"] == 1


BAD_QUANTITIES = [
    ("10x", 'invalid quantity "10x"'),
    ("", 'invalid quantity ""'),
    ("1.2.3", 'invalid quantity "1.2.3"'),
    (" 1", 'invalid quantity " 1"'),
    ("-1", 'invalid quantity "-1": must not be negative'),
    ("1e99", 'invalid quantity "1e99"'),  # exponent out of range
    (True, "invalid quantity True: expected a string or a number"),
    (None, "invalid quantity None: expected a string or a number"),
]


@pytest.mark.parametrize(("quantity", "problem"), BAD_QUANTITIES)
def test_it_names_the_object_and_field_of_an_invalid_quantity(quantity, problem):
    pod = make_pod("web-1", requests={"cpu": quantity})
    with pytest.raises(ConversionError) as caught:
        pod_view(pod)
    assert (
        str(caught.value)
        == f"pod default/web-1: spec.containers[0].resources.requests.cpu: {problem}"
    )
    assert caught.value.field == "spec.containers[0].resources.requests.cpu"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"initContainers": [c(cpu="1"), c(cpu="1"), make_container(limits={"memory": "x"})]},
         "spec.initContainers[2].resources.limits.memory"),
        ({"overhead": {"cpu": "x"}}, "spec.overhead.cpu"),
        ({"resources": {"limits": {"memory": "x"}}}, "spec.resources.limits.memory"),
        ({"containers": [c(cpu="1"), make_container(requests={"nvidia.com/gpu": "x"})]},
         "spec.containers[1].resources.requests.nvidia.com/gpu"),
    ],
)  # fmt: skip
def test_it_names_the_field_of_an_invalid_quantity_anywhere_in_a_pod(spec, field):
    pod = make_pod("web-1", cpu="100m")
    pod["spec"].update(spec)
    with pytest.raises(ConversionError, match=r"^pod default/web-1: ") as caught:
        pod_view(pod)
    assert caught.value.field == field


def test_it_names_the_node_and_field_of_an_invalid_capacity():
    node = make_node("n1", cpu="four")
    with pytest.raises(ConversionError) as caught:
        node_view(node, requested={}, pod_count=0)
    assert str(caught.value) == 'node n1: status.capacity.cpu: invalid quantity "four"'


# ---------------------------------------------------------------------------------------------
# QoS class (ComputePodQOS)

QOS_CASES = [
    pytest.param([make_container()], [], "BestEffort", id="no resources"),
    pytest.param([c(cpu="100m")], [], "Burstable", id="requests only"),
    pytest.param(
        [make_container(requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"})],
        [], "Guaranteed", id="limits equal requests",
    ),
    pytest.param(
        [make_container(requests={"cpu": "500m", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"})],
        [], "Burstable", id="request below limit",
    ),
    pytest.param([make_container(limits={"cpu": "1"})], [], "Burstable", id="cpu limit only"),
    pytest.param(
        [make_container("a", limits={"cpu": "1", "memory": "1Gi"}), make_container("b")],
        [], "Burstable", id="one guaranteed and one best-effort container",
    ),
    pytest.param(
        [make_container(limits={"cpu": "1", "memory": "1Gi"})],
        [make_container("init", limits={"cpu": "1", "memory": "1Gi"})],
        "Guaranteed", id="init container guaranteed too",
    ),
    pytest.param(
        [make_container(limits={"cpu": "1", "memory": "1Gi"})], [c("init", cpu="100m")],
        "Burstable", id="init container without limits",
    ),
    pytest.param(
        [make_container(requests={"nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": "1"})],
        [], "BestEffort", id="only extended resources",
    ),
    pytest.param([c(cpu="0", memory="0")], [], "BestEffort", id="zero requests"),
]  # fmt: skip


@pytest.mark.parametrize(("containers", "inits", "qos"), QOS_CASES)
def test_it_computes_the_qos_class_when_status_has_none(containers, inits, qos):
    assert pod_view(make_pod(containers=containers, init_containers=inits))["qosClass"] == qos


def test_it_computes_qos_from_pod_level_resources():
    pod = make_pod(
        containers=[make_container(), make_container("b")],
        resources={"limits": {"cpu": "2", "memory": "2Gi"}},
    )
    # pod-level limits default the pod-level requests: equal, both cpu and memory -> Guaranteed
    assert pod_view(pod)["qosClass"] == "Guaranteed"


def test_it_takes_the_qos_class_from_status_when_present():
    pod = make_pod(cpu="100m")
    pod["status"]["qosClass"] = "Guaranteed"
    assert pod_view(pod)["qosClass"] == "Guaranteed"


# ---------------------------------------------------------------------------------------------
# owners, tolerations, taints, conditions, object


def _owner_ref(kind: str, name: str, controller: bool | None) -> dict:
    ref = {"apiVersion": "apps/v1", "kind": kind, "name": name}
    if controller is not None:
        ref["controller"] = controller
    return ref


@pytest.mark.parametrize(
    ("refs", "owner"),
    [
        ([], ("", "")),
        ([_owner_ref("ReplicaSet", "web-1a", True)], ("ReplicaSet", "web-1a")),
        # the controller wins over an earlier non-controller reference
        ([_owner_ref("ConfigMap", "cfg", False), _owner_ref("Job", "etl", True)], ("Job", "etl")),
        # no controller: the first reference
        ([_owner_ref("Workflow", "wf", None), _owner_ref("Job", "etl", False)], ("Workflow", "wf")),
    ],
)
def test_it_picks_the_controller_owner(refs, owner):
    pod = make_pod()
    pod["metadata"]["ownerReferences"] = refs
    view = pod_view(pod)
    assert (view["ownerKind"], view["ownerName"]) == owner


def test_it_normalises_tolerations_with_empty_strings_and_equal():
    pod = make_pod(
        tolerations=[
            {"operator": "Exists"},
            {"key": "gpu", "value": "yes", "effect": "NoSchedule", "tolerationSeconds": 30},
        ]
    )
    assert pod_view(pod)["tolerations"] == [
        {"key": "", "operator": "Exists", "value": "", "effect": ""},
        {"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"},
    ]


def test_it_fills_the_pod_view_fields():
    pod = make_pod(
        "web-1", namespace="web", cpu="250m", labels={"app": "web"}, node_name="n1",
        owner=("ReplicaSet", "web-5d"), priority=1000, nodeSelector={"disk": "ssd"},
    )  # fmt: skip
    pod["metadata"]["annotations"] = {"team": "a"}
    view = pod_view(pod)
    assert set(view) == set(PodView.__annotations__) - {"admitted"}  # admitted: text only
    assert view["uid"] == "uid-web-web-1"
    assert (view["name"], view["namespace"], view["nodeName"]) == ("web-1", "web", "n1")
    assert (view["labels"], view["annotations"]) == ({"app": "web"}, {"team": "a"})
    assert (view["schedulerName"], view["priority"], view["phase"]) == ("schedweb", 1000, "Running")
    assert view["nodeSelector"] == {"disk": "ssd"}


def test_it_applies_api_defaults_for_absent_fields():
    pod = {"metadata": {"name": "bare"}, "spec": {"containers": [{"name": "app"}]}}
    view = pod_view(pod)
    assert (view["namespace"], view["uid"], view["schedulerName"]) == (
        "default",
        "",
        "default-scheduler",
    )
    assert (view["phase"], view["priority"], view["nodeName"]) == ("Pending", 0, "")
    assert (view["labels"], view["tolerations"], view["ownerKind"]) == ({}, [], "")


def test_it_fills_the_node_view_fields():
    node = make_node(
        "n1", cpu="4", memory="16Gi", gpus=4, allocatable={"cpu": "3920m"},
        taints=[{"key": "gpu", "effect": "NoSchedule"}], unschedulable=True, ready=False,
    )  # fmt: skip
    view = node_view(node, requested={"cpu": 500, "nvidia_com_gpu": 1}, pod_count=3)
    assert set(view) == set(NodeView.__annotations__)
    assert view["capacity"] == {"cpu": 4000, "memory": 16 * Gi, "pods": 110, "nvidia_com_gpu": 4}
    assert view["allocatable"]["cpu"] == 3920
    # the given usage, copied, with memory added as 0
    assert view["requested"] == {"cpu": 500, "nvidia_com_gpu": 1, "memory": 0}
    assert view["podCount"] == 3
    assert view["taints"] == [{"key": "gpu", "value": "", "effect": "NoSchedule"}]
    assert (view["unschedulable"], view["conditions"]) == (True, {"Ready": "False"})
    assert all(isinstance(view[k], ResourceMap) for k in ("capacity", "allocatable", "requested"))


def test_it_copies_the_requested_map_it_is_given():
    usage = {"cpu": 500}
    view = node_view(make_node(), requested=usage, pod_count=1)
    usage["cpu"] = 900
    assert view["requested"]["cpu"] == 500


def test_a_node_without_allocatable_can_use_its_capacity():
    node = make_node("n1", cpu="8")
    del node["status"]["allocatable"]
    assert node_view(node, requested={}, pod_count=0)["allocatable"]["cpu"] == 8000


def test_it_strips_managed_fields_keeps_images_and_leaves_the_input_untouched():
    node = make_node("n1")
    node["metadata"]["managedFields"] = [{"manager": "kubelet"}]
    node["status"]["images"] = [{"names": ["busybox"], "sizeBytes": 1}]
    pod = make_pod("p1")
    pod["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    before = copy.deepcopy((node, pod))

    node_object = node_view(node, requested={}, pod_count=0)["object"]
    pod_object = pod_view(pod)["object"]

    assert "managedFields" not in node_object["metadata"]
    # kube-scheduler's ImageLocality scores from the node's images (the scheduler model reads them)
    assert node_object["status"]["images"] == [{"names": ["busybox"], "sizeBytes": 1}]
    assert "managedFields" not in pod_object["metadata"]
    assert node_object["metadata"]["name"] == "n1" and pod_object["spec"] == pod["spec"]
    assert (node, pod) == before


# ---------------------------------------------------------------------------------------------
# bad objects


def _pod_with(path: str, value) -> dict:
    pod = make_pod("web-1")
    *parents, last = path.split(".")
    target = pod
    for key in parents:
        target = target[key]
    target[last] = value
    return pod


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ([], "pod: expected a JSON object, got a list"),
        ({"spec": {}}, "pod: metadata: missing or not an object"),
        ({"metadata": {"namespace": "web"}}, "pod web/<unnamed>: metadata.name: missing or not a string"),
        (_pod_with("metadata.name", 7), "pod default/<unnamed>: metadata.name: missing or not a string"),
        (_pod_with("spec", "x"), "pod default/web-1: spec: expected an object, got a string"),
        (_pod_with("spec.containers", {}), "pod default/web-1: spec.containers: expected a list, got an object"),
        (_pod_with("spec.containers", ["app"]), "pod default/web-1: spec.containers[0]: expected an object, got a string"),
        (_pod_with("metadata.labels", {"gpu": True}), "pod default/web-1: metadata.labels.gpu: expected a string, got bool"),
        (_pod_with("spec.priority", "high"), "pod default/web-1: spec.priority: expected an integer, got 'high'"),
        (_pod_with("spec.tolerations", ["x"]), "pod default/web-1: spec.tolerations[0]: expected an object"),
        (_pod_with("metadata.ownerReferences", "x"), "pod default/web-1: metadata.ownerReferences: expected a list, got a string"),
    ],
)  # fmt: skip
def test_it_rejects_a_malformed_pod_with_a_precise_message(obj, message):
    with pytest.raises(ConversionError) as caught:
        pod_view(obj)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda n: n["metadata"].pop("name"), "node: metadata.name: missing or not a string"),
        (lambda n: n["status"].update(conditions=[{"status": "True"}]),
         "node n1: status.conditions[0]: expected an object with a type"),
        (lambda n: n["spec"].update(taints="x"), "node n1: spec.taints: expected a list, got a string"),
        (lambda n: n["status"].update(capacity=["4"]), "node n1: status.capacity: expected an object, got a list"),
    ],
)  # fmt: skip
def test_it_rejects_a_malformed_node_with_a_precise_message(mutate, message):
    node = make_node("n1")
    mutate(node)
    with pytest.raises(ConversionError) as caught:
        node_view(node, requested={}, pod_count=0)
    assert str(caught.value) == message
