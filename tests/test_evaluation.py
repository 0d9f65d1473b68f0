"""policies/evaluation.py: one compile, one preview, one test-case runner for every caller."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policies.cluster.demo import demo_objects
from policies.cluster.sources import cluster_load
from policies.evaluation import policy_compile, preview_run, test_cases_run
from tests.web.test_commands import run

EXAMPLES = Path(__file__).resolve().parents[1] / "policies" / "examples"
POD = {
    "metadata": {"name": "abc"},
    "spec": {"schedulerName": "schedweb", "containers": [{"name": "c", "image": "x"}]},
}


def _document(*clusters: str) -> str:
    cases = "".join(
        f"  - name: case-{i}\n    cluster: {c}\n    pod: {json.dumps(POD)}\n"
        f"    expect: {{winner: cp-1}}\n"
        for i, c in enumerate(clusters)
    )
    return (EXAMPLES / "seed-003-name-length.yaml").read_text() + "\ntests:\n" + cases


def test_a_tests_cluster_means_the_same_to_the_command_and_to_publish(tmp_path, settings):
    """demo and snapshot mean the bundled demo and the installation's source everywhere; a file
    is a path relative to the document, read only by `manage.py policy test`."""
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    nodes, pods = demo_objects()
    (tmp_path / "c.json").write_text(json.dumps({"kind": "List", "items": nodes + pods}))
    path = tmp_path / "p.yaml"
    path.write_text(_document("demo", "snapshot", "c.json"))
    code, out, _ = run("policy", "test", str(path))
    assert code == 0, out
    assert out.splitlines()[-1] == "3 of 3 test cases passed"

    results = test_cases_run(compiled=policy_compile(path.read_text()))
    assert [r["passed"] for r in results] == [True, True, False]
    assert "only read by `manage.py policy test`" in results[2]["failures"][0]


def test_a_stored_case_with_no_cluster_uses_the_cluster_it_is_given(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"

    class Stored:
        name, pod, cluster, expect = "stored", json.dumps(POD), "", {"winner": "cp-1"}

    compiled = policy_compile((EXAMPLES / "seed-003-name-length.yaml").read_text())
    demo = cluster_load("demo")
    assert test_cases_run(compiled=compiled, stored=[Stored()], cluster=demo) == [
        {"name": "stored", "passed": True, "failures": []}
    ]


@pytest.mark.parametrize("bad_pod", ["kind: Node\n", "- a list\n", ""])
def test_an_unusable_pod_fails_its_case_with_the_reason(bad_pod):
    class Stored:
        name, pod, cluster, expect = "bad", bad_pod, "demo", {"applies": True}

    compiled = policy_compile((EXAMPLES / "seed-003-name-length.yaml").read_text())
    (result,) = test_cases_run(compiled=compiled, stored=[Stored()])
    assert result["passed"] is False and result["failures"]


def test_the_preview_compares_with_a_second_document_and_reports_one_that_no_longer_compiles():
    document = (EXAMPLES / "seed-003-name-length.yaml").read_text()
    from policies.cluster.manifest import pod_view_from_source

    pod, cluster = pod_view_from_source(POD), cluster_load("demo")
    same = preview_run(document=document, pod=pod, cluster=cluster, compare_document=document)
    assert same.comparison is not None and same.comparison["changes"] == []
    broken = preview_run(
        document=document, pod=pod, cluster=cluster, compare_document="name: x\nfilters: 3\n"
    )
    assert broken.comparison is None and broken.compare_error is not None
    assert broken.evaluation.winners() == same.evaluation.winners()


def test_compiling_uses_the_installations_budget_and_caches_by_text(settings):
    text = (
        "name: costly\nschedulerNames: [s]\nfilters:\n  - name: labels\n"
        "    expression: node.labels.all(k, node.labels.exists(j, j + k != ''))\n"
    )
    assert policy_compile(text) is policy_compile(text)
    settings.SCHEDWEB_CEL_COST_LIMIT = 50
    from policies.engine.document import PolicyInvalid

    with pytest.raises(PolicyInvalid, match="cost"):
        policy_compile(text)


def test_an_unschedulable_answer_is_kube_schedulers_failed_scheduling_message(db):
    """The answer says why a pod is unschedulable with the model's whole FailedScheduling
    message, in the preview and in a test case's failure."""
    from policies.cluster.manifest import pod_view_from_source

    document = (EXAMPLES / "seed-003-name-length.yaml").read_text()
    long_name = {**POD, "metadata": {"name": "abcdefg"}}  # longer than the policy allows
    preview = preview_run(
        document=document, pod=pod_view_from_source(long_name), cluster=cluster_load("demo")
    )
    message = preview.cycle.failed_scheduling()
    assert message and message.startswith("0/36 nodes are available: ")
    assert preview.placement.summary() == f"unschedulable: {message}"

    class Stored:
        name, pod, cluster, expect = "lands", json.dumps(long_name), "demo", {"landsIn": ["cp-1"]}

    (result,) = test_cases_run(compiled=policy_compile(document), stored=[Stored()])
    assert result["failures"] == [
        f"expected the pod to land in cp-1, but it is unschedulable: {message}"
    ]
