"""The example policies and pods: well-formed documents that port the seeds as described."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from policies.cluster.convert import pod_view

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"
POLICIES = sorted(EXAMPLES.glob("*.yaml"))
PODS = sorted((EXAMPLES / "pods").glob("*.yaml"))
NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def test_every_required_example_exists():
    assert {p.name for p in POLICIES} == {
        "seed-003-name-length.yaml",
        "seed-000-name-score.yaml",
        "seed-002-gang.yaml",
        "seed-002-queue.yaml",
        "seed-002.yaml",
        "least-allocated.yaml",
        "bin-packing.yaml",
        "prefer-label-avoid-taint.yaml",
        "gpu-packing.yaml",
        "zone-spread.yaml",
    }
    assert {p.name for p in PODS} == {
        "web.yaml", "gpu-training.yaml", "batch.yaml", "abc.yaml", "abcdefg.yaml", "gang-member.yaml",
    }  # fmt: skip


@pytest.mark.parametrize("path", POLICIES, ids=lambda p: p.name)
def test_each_policy_follows_the_document_format(path):
    text = path.read_text()
    assert text.startswith("#"), "a top comment explains the policy"
    policy = load(path)
    assert f"{policy['name']}.yaml" == path.name
    assert NAME.match(policy["name"]) and len(policy["name"]) <= 63
    assert policy["schedulerNames"] == ["schedweb"]
    assert policy.get("failurePolicy", "Ignore") in ("Ignore", "Fail")
    assert policy.get("filters") or policy.get("scores") or policy.get("queue")
    for key in ("matchConditions", "variables", "filters", "scores"):
        for rule in policy.get(key, []):
            assert isinstance(rule["name"], str) and isinstance(rule["expression"], str)
    for rule in policy.get("scores", []):
        assert 0 <= rule.get("weight", 1) <= 100 and rule.get("normalize") in ("none", "minmax")
    for rule in policy.get("filters", []):
        assert isinstance(rule.get("unresolvable", True), bool)


def test_seed_000_uses_the_printable_ascii_alphabet():
    expression = load(EXAMPLES / "seed-000-name-score.yaml")["scores"][0]["expression"]
    literal = re.search(r'"((?:[^"\\]|\\.)*)"\.indexOf', expression).group(1)
    alphabet = re.sub(r"\\(.)", r"\1", literal)  # CEL escapes \" and \\
    # characters 32..126: indexOf(c) + 32 is the byte value of c
    assert alphabet == "".join(chr(code) for code in range(32, 127))


def test_seed_003_matches_the_original_extender():
    policy = load(EXAMPLES / "seed-003-name-length.yaml")
    assert policy["filters"][0]["expression"] == "size(pod.name) < 5"
    assert policy["filters"][0]["unresolvable"] is True
    assert policy["scores"][0]["expression"] == "20 - size(node.name)"
    assert policy["scores"][0]["normalize"] == "minmax"


def test_seed_002_waits_without_marking_nodes_unresolvable():
    policy = load(EXAMPLES / "seed-002-gang.yaml")
    assert policy["filters"][0]["unresolvable"] is False
    assert "cluster.countPods(pod.namespace" in policy["variables"][0]["expression"]


@pytest.mark.parametrize("path", PODS, ids=lambda p: p.name)
def test_each_example_pod_converts_and_targets_schedweb(path):
    view = pod_view(load(path))
    assert view["schedulerName"] == "schedweb" and view["nodeName"] == ""


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        # 250m request, memory limit above its request, no CPU limit -> Burstable
        ("web.yaml", {"cpu": 250, "qosClass": "Burstable"}),
        # limits only: requests default to them -> 8 CPUs, 2 GPUs, Guaranteed
        ("gpu-training.yaml", {"cpu": 8000, "nvidia_com_gpu": 2, "qosClass": "Guaranteed"}),
        # init 1500m > container 1000m -> max(1000, 1500) = 1500
        ("batch.yaml", {"cpu": 1500, "qosClass": "Burstable"}),
        ("abc.yaml", {"cpu": 100, "name_length": 3}),
        ("abcdefg.yaml", {"cpu": 100, "name_length": 7}),
        ("gang-member.yaml", {"nvidia_com_gpu": 2, "podGroup": "train-llama", "minAvailable": "4"}),
    ],
)
def test_example_pods_request_what_their_comments_say(pod, expected):
    view = pod_view(load(EXAMPLES / "pods" / pod))
    actual = {
        "cpu": view["requests"]["cpu"],
        "nvidia_com_gpu": view["requests"]["nvidia_com_gpu"],
        "qosClass": view["qosClass"],
        "name_length": len(view["name"]),
        "podGroup": view["labels"].get("podGroup"),
        "minAvailable": view["labels"].get("minAvailable"),
    }
    assert {k: actual[k] for k in expected} == expected
