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
