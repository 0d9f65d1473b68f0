"""Pasted objects -> the pod the engine judges: a Pod, or a workload's pod template."""

from __future__ import annotations

import pytest
import yaml

from policies.cluster.manifest import pod_view_from_text
from policies.errors import InputError

TEMPLATE = {
    "metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}},
    "spec": {
        "schedulerName": "schedweb",
        "nodeSelector": {"disk": "ssd"},
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "250m"}}}],
    },
}


def workload(kind: str) -> str:
    spec = {"template": TEMPLATE}
    if kind == "CronJob":
        spec = {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": TEMPLATE}}}
    return yaml.safe_dump(
        {
            "apiVersion": "apps/v1",
            "kind": kind,
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": spec,
        }
    )


@pytest.mark.parametrize(
    "kind",
    [
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "ReplicaSet",
        "ReplicationController",
        "Job",
        "CronJob",
    ],
)
def test_a_workload_is_judged_by_its_pod_template(kind):
    pod = pod_view_from_text(workload(kind))
    assert (pod["namespace"], pod["name"]) == ("shop", f"web-{kind.lower()}-template")
    assert pod["labels"] == {"app": "web"}
    assert pod["schedulerName"] == "schedweb"
    assert pod["requests"]["cpu"] == 250
    assert pod["object"]["spec"]["nodeSelector"] == {"disk": "ssd"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "kind: Deployment\nmetadata: {name: d}\nspec: {}\n",
            "Deployment: spec.template: expected the pod template",
        ),
        (
            "kind: CronJob\nspec: {jobTemplate: []}\n",
            "CronJob: spec.jobTemplate.spec.template: expected",
        ),
        (
            "kind: Job\nspec: {template: {metadata: [1]}}\n",
            "Job: spec.template.metadata: expected an object, got a list",
        ),
        (
            "kind: Service\nmetadata: {name: s}\n",
            "expected a Pod or a workload with a pod template",
        ),
        ("kind: [Deployment]\n", "got kind ['Deployment']"),
    ],
)
def test_a_workload_without_a_usable_template_is_refused_in_words(text, message):
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        pod_view_from_text(text)


# --- the playground's pod search ---------------------------------------------------------------


@pytest.fixture(scope="module")
def demo():
    from policies.cluster.sources import cluster_load

    return cluster_load("demo")


def test_search_matches_name_parts_and_labels_all_terms_pending_first(demo):
    from policies.cluster.filters import pods_search

    found = pods_search(loaded=demo, query="web/ app=api tier=backend")
    assert found and all(p["namespace"] == "web" and p["labels"]["app"] == "api" for p in found)
    every = pods_search(loaded=demo, query="a", limit=500)
    bound = [bool(p["nodeName"]) for p in every]
    assert bound == sorted(bound)  # pending pods come first
    assert len(pods_search(loaded=demo, query="a", limit=3)) == 3
    assert pods_search(loaded=demo, query="no-such-pod-anywhere") == []
    assert [p["name"] for p in pods_search(loaded=demo, query="DEFAULT/ABCDEFG")] == ["abcdefg"]


@pytest.mark.parametrize("query", ["x" * 600, "a\x00b", "=web"])
def test_a_malformed_search_is_an_input_error(demo, query):
    from policies.cluster.filters import pods_search

    with pytest.raises(InputError):
        pods_search(loaded=demo, query=query)
