"""One evaluator, three callers: the extender, the REST preview and `evaluate` agree exactly."""

from __future__ import annotations

import random

import orjson
import pytest

from policies import services
from tests.asgiclient import extender_post
from tests.conftest import make_user, token_client

from .conftest import args_body, example, go_pod, runtime_by_hand

pytestmark = pytest.mark.django_db


def generated_pods(count: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    pods = []
    for i in range(count):
        pod = go_pod(
            rng.choice(["abc", "web", f"gen-{i}", "x"]) if rng.random() < 0.3 else f"gen-{i}",
            cpu=f"{rng.choice([10, 100, 500, 1500, 4000, 12000])}m",
            memory=f"{rng.choice([32, 512, 4096, 30000])}Mi",
            labels={
                "app": rng.choice(["web", "api", "batch"]),
                "tier": rng.choice(["frontend", "backend"]),
            },
            uid=f"uid-{seed}-{i}",
        )
        if rng.random() < 0.3:
            pod["spec"]["tolerations"].append(
                {"key": "cloud.example.com/spot", "operator": "Exists", "effect": "NoSchedule"}
            )
        if rng.random() < 0.25:
            pod["spec"]["containers"][0]["resources"]["limits"] = {
                "nvidia.com/gpu": str(rng.choice([1, 2, 4]))
            }
            pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = pod["spec"][
                "containers"
            ][0]["resources"]["limits"]["nvidia.com/gpu"]
        pods.append(pod)
    return pods


@pytest.mark.parametrize(
    "name",
    [
        "least-allocated",
        "bin-packing",
        "zone-spread",
        "prefer-label-avoid-taint",
        "gpu-packing",
        "seed-003-name-length",
        "seed-000-name-score",
    ],
)
def test_extender_and_rest_preview_agree_on_50_generated_pods(publish, name):
    text = example(name)
    publish(text)
    user = make_user("viewer-p", "viewer")
    api = token_client(user)
    for pod in generated_pods(50, seed=len(name)):
        preview = api.post(
            "/api/v1/preview", {"document": text, "pod": pod, "cluster": "demo"}, format="json"
        ).json()["result"]
        filtered = orjson.loads(extender_post("filter", args_body(pod)).content)
        expected_pass = [n["node"] for n in preview["nodes"] if n["verdict"] == "pass"]
        assert sorted(filtered["NodeNames"]) == sorted(expected_pass), pod["metadata"]["name"]
        rejected = {**filtered["FailedNodes"], **filtered["FailedAndUnresolvableNodes"]}
        assert set(rejected) == {n["node"] for n in preview["nodes"] if n["verdict"] == "reject"}
        if len(expected_pass) >= 2:
            scores = orjson.loads(
                extender_post("prioritize", args_body(pod, expected_pass)).content
            )
            want = {
                n["node"]: n["extenderScore"] for n in preview["nodes"] if n["verdict"] == "pass"
            }
            assert {s["Host"]: s["Score"] for s in scores} == want, pod["metadata"]["name"]


def test_sampled_decisions_are_stored_by_the_task_with_per_node_outcomes(publish):
    from policies.models import Decision

    publish(example("seed-003-name-length"))
    state = runtime_by_hand()  # the decisions are taken here, not by a round of its thread
    extender_post("filter", args_body(go_pod("abc"), ["cp-1", "a-small-1"]))
    extender_post("prioritize", args_body(go_pod("abc"), ["cp-1", "a-small-1"]))
    extender_post(
        "filter", args_body(go_pod("abcdefg"), ["cp-1", "a-small-1"])
    )  # nothing passes: recorded
    extender_post(
        "bind",
        orjson.dumps(
            {
                "PodName": "abc",
                "PodNamespace": "default",
                "PodUID": go_pod("abc")["metadata"]["uid"],
                "Node": "cp-1",
            }
        ),
    )
    batch = state.decisions.take()
    assert [d.get("verb", d["kind"]) for d in batch] == ["prioritize", "filter"]
    services.decisions_store(
        batch=[
            *batch,
            {
                "kind": "chosen",
                "podUid": go_pod("abc")["metadata"]["uid"],
                "node": "cp-1",
                "at": batch[0]["at"],
            },
        ]
    )
    stored = {d.pod_name: d for d in Decision.objects.all()}
    assert stored["abc"].chosen_node == "cp-1" and stored["abc"].policy_version == 1
    assert [n["n"] for n in stored["abc"].nodes["nodes"]] == ["cp-1", "a-small-1"]
    assert stored["abc"].nodes["nodes"][0]["ext"] == 10
    assert stored["abcdefg"].nodes["nodes"][0]["rule"] == "short-pod-name"
