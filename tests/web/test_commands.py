"""The `evaluate` and `policy` management commands."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

from policies.cluster.demo import demo_objects

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"


def run(*args: str) -> tuple[int, str, str]:
    import io

    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


def _seed003(pod: str = "abc", *extra: str) -> tuple[int, str, str]:
    return run(
        "evaluate",
        "--policy",
        str(EXAMPLES / "seed-003-name-length.yaml"),
        "--pod",
        str(EXAMPLES / "pods" / f"{pod}.yaml"),
        *extra,
    )


def test_evaluate_gives_one_answer_kube_schedulers_pick_first_and_stars_nothing_else():
    # Issue 23: the policy alone scores cp-1 highest (shortest name, 20 - 4 = 16), but
    # kube-scheduler rejects it for its control-plane taint; its pick, c-mem-1, is the answer:
    # named first, the only starred node; cp-1 shows up as the policy's rank 1 over every node
    code, out, _ = _seed003()
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "pod default/abc · policy seed-003-name-length · cluster demo (36 nodes)"
    assert lines[1] == "kube-scheduler v1.35 · LeastAllocated · extender weight 1"
    assert lines[2].startswith("answer: lands on c-mem-1 (final total ")
    starred = [line.split()[0] for line in lines if line.startswith("*")]
    assert starred == ["*c-mem-1"]
    assert "best:" not in out and "winner" not in out
    policy_table = out.split("the policy alone over every node (policy-level)\n", 1)[1]
    header, cp = policy_table.splitlines()[:2]
    assert header.split()[-4:] == ["TOTAL", "EXT", "RANK", "NOTES"]
    # cp-1: minmax gives it 100 -> ext 10, the policy's rank 1 there (a column, no star)
    assert cp.split()[:2] == ["cp-1", "pass"] and cp.split()[-3:] == ["100", "10", "1"]


def _policy_summary(lines: list[str]) -> str:
    """The policy table's last line ("N of M nodes pass the policy's filters")."""
    return next(line for line in lines if " nodes pass" in line)


def test_evaluate_prints_kube_schedulers_cycle_around_the_policy():
    # Issue 16: the table shows the in-tree verdict, the plugins' total, the extender's 0-10 x
    # weight 1 x 10, the final total, the policy's score and rank there, and the pick
    code, out, _ = _seed003()
    assert code == 0
    section = out.split("kube-scheduler v1.35 · LeastAllocated · extender weight 1\n", 1)[1]
    lines = section.splitlines()
    assert lines[1].split() == [
        "NODE", "FILTERS", "POLICY", "PLUGINS", "+POLICY", "FINAL", "POLICY", "SCORE", "POLICY", "RANK"
    ]  # fmt: skip
    cp = next(line for line in lines if line.split()[0] == "cp-1")
    assert cp.split()[1:4] == ["reject:", "TaintToleration", "-"]
    assert "node(s) had untolerated taint(s)" in cp
    best = lines[2].split()
    assert best[0] == "*c-mem-1" and best[1:3] == ["pass", "pass"]
    plugins, extender, final = (int(x) for x in best[3:6])
    assert plugins + extender == final and extender % 10 == 0
    # c-mem-1's policy score among the nodes sent: the shortest name left, 100 -> 10, rank 1
    assert best[6:] == ["100", "(10)", "1"]
    assert "kube-scheduler picks: c-mem-1" in lines


def test_evaluate_says_a_long_named_pod_is_unschedulable_with_the_policy_message():
    code, out, _ = _seed003("abcdefg")
    assert code == 0
    lines = out.splitlines()
    # the answer is kube-scheduler's FailedScheduling message, whole (its entries sorted as
    # strings, the extender's "rule: message" counted like a plugin's reason)
    assert lines[2].startswith("answer: unschedulable: 0/36 nodes are available: ")
    assert ", 27 short-pod-name: pod name abcdefg is 7 characters, the limit is 4, " in lines[2]
    assert lines[2].endswith(
        "preemption: 0/36 nodes are available: 36 Preemption is not helpful for scheduling."
    )
    assert f"FailedScheduling: {lines[2].removeprefix('answer: unschedulable: ')}" in lines
    assert _policy_summary(lines) == "0 of 36 nodes pass the policy's filters"


def test_evaluate_json_gives_the_same_one_answer():
    code, out, _ = _seed003("abc", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["answer"]["pick"] == data["kubeScheduler"]["pick"] == ["c-mem-1"]
    assert data["answer"]["outcome"] == "scheduled" and data["answer"]["tie"] is False
    assert "winners" not in data["summary"] and "winners" not in json.dumps(data)
    by_node = {n["node"]: n for n in data["nodes"]}
    assert by_node["cp-1"]["policyRank"] == 1  # the policy alone over every node: a column
    cycle = {n["node"]: n for n in data["kubeScheduler"]["nodes"]}
    assert cycle["c-mem-1"]["policyRank"] == 1 and cycle["cp-1"]["policyRank"] is None
    assert data["answer"]["finalTotal"] == cycle["c-mem-1"]["finalTotal"]


def test_evaluate_json_gives_integer_extender_scores():
    code, out, _ = run(
        "evaluate",
        "--policy",
        str(EXAMPLES / "least-allocated.yaml"),
        "--pod",
        str(EXAMPLES / "pods" / "web.yaml"),
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    assert data["cluster"] == "demo" and data["applies"] is True
    assert len(data["nodes"]) == 36
    assert all(
        type(n["extenderScore"]) is int and 0 <= n["extenderScore"] <= 10 for n in data["nodes"]
    )
    # kube-scheduler's columns: in-tree verdict and plugin, plugin scores, extender, final, pick
    ks = data["kubeScheduler"]
    assert ks["extenderWeight"] == 1 and ks["pick"]
    by_node = {n["node"]: n for n in ks["nodes"]}
    assert by_node["cp-1"]["kubeScheduler"] == {
        "verdict": "reject",
        "plugin": "TaintToleration",
        "reasons": ["node(s) had untolerated taint(s)"],
    }
    picked = by_node[ks["pick"][0]]
    plugins = sum(s["weighted"] for s in picked["pluginScores"])
    assert picked["finalTotal"] == plugins + picked["extenderContribution"]


def test_evaluate_reads_a_kubectl_json_file(tmp_path):
    nodes, pods = demo_objects()
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [*nodes, *pods]}))
    code, out, _ = run(
        "evaluate",
        "--policy",
        str(EXAMPLES / "seed-003-name-length.yaml"),
        "--pod",
        str(EXAMPLES / "pods" / "abc.yaml"),
        "--cluster",
        str(path),
    )
    assert code == 0 and f"cluster file {path} (36 nodes)" in out.splitlines()[0]


def test_evaluate_prints_every_error_of_an_invalid_policy_as_file_line_col_and_exits_2(tmp_path):
    policy = tmp_path / "bad.yaml"
    policy.write_text(
        "name: bad\nschedulerNames: [s]\nfilters:\n  - name: a\n    expression: node.alocatable.cpu > 0\nscores:\n  - name: b\n    expression: '\"x\"'\n    weight: -1\n"
    )
    code, _, err = run(
        "evaluate", "--policy", str(policy), "--pod", str(EXAMPLES / "pods" / "abc.yaml")
    )
    assert code == 2
    # one position each, the document's (`node.` ends at column 21 of line 5): the form
    # compilers print and editors and CI annotators parse; in document order, then a count
    assert err.splitlines() == [
        f"{policy}:5:22: error: filters[0].expression: undefined field 'alocatable' on Node; "
        "did you mean 'allocatable'?",
        f"{policy}:8:18: error: scores[0].expression: expected int or double, got string",
        f"{policy}:9:13: error: scores[0].weight: weight must not be negative, got -1",
        f"{policy}: the policy is invalid (3 errors)",
    ]
    for line in err.splitlines()[:-1]:
        assert re.fullmatch(r"[^:]+:\d+:\d+: error: \S+: .+", line), line


def test_policy_test_prints_an_invalid_documents_errors_in_the_same_form(tmp_path):
    policy = tmp_path / "bad.yaml"
    policy.write_text(
        "name: bad\nschedulerNames: [s]\nfilters:\n  - name: a\n    expression: 1 +\n"
    )
    code, _, err = run("policy", "test", str(policy))
    assert code == 2
    assert re.search(
        rf"^{re.escape(str(policy))}:5:\d+: error: filters\[0\]\.expression: ", err, re.M
    ), err


def test_evaluate_json_with_an_invalid_policy_prints_its_errors_as_json_in_document_order(
    tmp_path,
):
    policy = tmp_path / "bad.yaml"
    policy.write_text(
        "name: bad\nschedulerNames: [s]\nfilters:\n  - name: a\n    expression: node.alocatable.cpu > 0\nscores:\n  - name: b\n    expression: '\"x\"'\n    weight: -1\n"
    )
    code, out, _ = run(
        "evaluate", "--policy", str(policy), "--pod", str(EXAMPLES / "pods" / "abc.yaml"), "--json"
    )
    assert code == 2
    payload = json.loads(out)
    assert payload["valid"] is False
    assert [(e["path"], e["docLine"]) for e in payload["errors"]] == [
        ("filters[0].expression", 5),
        ("scores[0].expression", 8),
        ("scores[0].weight", 9),
    ]


def test_evaluate_json_with_an_unreadable_pod_prints_the_error_as_json(tmp_path):
    code, out, _ = run(
        "evaluate",
        "--policy",
        str(EXAMPLES / "least-allocated.yaml"),
        "--pod",
        str(tmp_path / "missing.yaml"),
        "--json",
    )
    assert code == 2
    assert "cannot read the pod file" in json.loads(out)["error"]


@pytest.mark.parametrize(
    ("pod_text", "message"),
    [
        ("- not\n- a pod\n", "must be a mapping"),
        (
            "kind: Service\nmetadata: {name: s}\n",
            "expected a Pod or a workload with a pod template",
        ),
        (
            "metadata: {name: p}\nspec:\n  containers: [{name: c, resources: {requests: {cpu: 10x}}}]\n",
            'invalid quantity "10x"',
        ),
    ],
)
def test_evaluate_refuses_a_bad_pod_with_a_clear_message(tmp_path, pod_text, message):
    pod = tmp_path / "pod.yaml"
    pod.write_text(pod_text)
    code, _, err = run(
        "evaluate", "--policy", str(EXAMPLES / "least-allocated.yaml"), "--pod", str(pod)
    )
    assert code == 2 and message in err


def test_evaluate_names_a_missing_file():
    code, _, err = run("evaluate", "--policy", "/nope.yaml", "--pod", "/nope.yaml")
    assert code == 2 and "cannot read the policy file /nope.yaml" in err


@pytest.mark.django_db
def test_policy_import_creates_then_updates_and_export_round_trips(tmp_path):
    source = EXAMPLES / "least-allocated.yaml"
    code, out, _ = run("policy", "import", str(source))
    assert code == 0 and out.strip() == f"{source}: created policy least-allocated"
    code, out, _ = run("policy", "import", str(source))
    assert out.strip() == f"{source}: updated policy least-allocated"
    target = tmp_path / "out.yaml"
    assert run("policy", "export", "least-allocated", "-o", str(target))[0] == 0
    assert target.read_text() == source.read_text()


@pytest.mark.django_db
def test_export_carries_the_recorded_test_cases_and_an_import_elsewhere_runs_them(tmp_path):
    from policies import services
    from policies.evaluation import policy_compile, test_cases_run
    from policies.models import Policy

    source = EXAMPLES / "seed-003-name-length.yaml"
    run("policy", "import", str(source))
    policy = Policy.objects.get(name="seed-003-name-length")
    pod = "metadata: {name: abc, namespace: default}\nspec: {schedulerName: schedweb}\n"
    for name, winner in (("abc-on-cp-1", "cp-1"), ("abc-anywhere", None)):
        expect = {"winner": winner} if winner else {"applies": True}
        services.test_case_create(
            actor=None, policy=policy, name=name, pod=pod, cluster="demo", expect=expect
        )
    target = tmp_path / "exported.yaml"
    assert run("policy", "export", policy.name, "-o", str(target))[0] == 0
    exported = target.read_text()
    assert exported.startswith(source.read_text().rstrip("\n"))  # comments and layout kept
    code, out, _ = run("policy", "test", str(target))
    assert code == 0 and out.splitlines()[-1] == "2 of 2 test cases passed"

    policy.delete()  # "elsewhere": a database without the recorded cases
    run("policy", "import", str(target))
    imported = Policy.objects.get(name="seed-003-name-length")
    results = test_cases_run(compiled=policy_compile(imported.draft), stored=[])
    assert sorted((r["name"], r["passed"]) for r in results) == [
        ("abc-anywhere", True),
        ("abc-on-cp-1", True),
    ]


def test_policy_test_without_any_test_case_fails_unless_allowed(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text((EXAMPLES / "least-allocated.yaml").read_text())
    code, _, err = run("policy", "test", str(path))
    assert code == 1 and "no test cases found" in err
    assert run("policy", "test", str(path), "--allow-empty")[0] == 0


@pytest.mark.django_db
def test_policy_import_of_an_invalid_file_exits_2_and_stores_nothing(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nschedulerNames: [s]\nscores: [{name: a, expression: nod.name}]\n")
    code, _, err = run("policy", "import", str(bad))
    assert code == 2 and "undeclared reference" in err
    from policies.models import Policy

    assert not Policy.objects.exists()


def test_policy_test_runs_the_documents_tests_and_fails_ci_on_a_failure(tmp_path):
    pod = {
        "metadata": {"name": "abc"},
        "spec": {"schedulerName": "schedweb", "containers": [{"name": "c", "image": "x"}]},
    }
    doc = (
        (EXAMPLES / "seed-003-name-length.yaml").read_text()
        + "\n"
        + "tests:\n"
        + (
            f"  - name: shortest-wins\n    pod: {json.dumps(pod)}\n    expect: {{winner: cp-1}}\n"
            f"  - name: wrong\n    pod: {json.dumps(pod)}\n    expect: {{winner: a-small-1, verdicts: {{b-small-1: reject}}}}\n"
        )
    )
    path = tmp_path / "p.yaml"
    path.write_text(doc)
    code, out, _ = run("policy", "test", str(path))
    assert code == 1
    # an older document's policy-level `winner` keeps working, labelled as such
    assert f"{path}: shortest-wins: ok  (policy-level: winner)" in out
    assert f"{path}: wrong: FAIL  (policy-level: winner, verdicts)" in out
    assert "expected the policy's top node (policy-level winner) a-small-1, got cp-1" in out
    assert "node b-small-1: expected the policy's reject, got pass" in out
    assert out.splitlines()[-2].startswith("policy-level: the policy alone over every node")
    assert out.splitlines()[-1] == "1 of 2 test cases passed"


def test_the_commands_apply_the_installations_cost_limit(tmp_path, settings):
    """evaluate and policy test judge a policy as publish and the extender do."""
    policy = tmp_path / "costly.yaml"
    policy.write_text(
        "name: costly\nschedulerNames: [s]\nfilters:\n  - name: labels\n"
        "    expression: node.labels.all(k, node.labels.exists(j, j + k != ''))\n"
    )
    pod = str(EXAMPLES / "pods" / "abc.yaml")
    assert run("evaluate", "--policy", str(policy), "--pod", pod)[0] == 0
    settings.SCHEDWEB_CEL_COST_LIMIT = 50
    code, _, err = run("evaluate", "--policy", str(policy), "--pod", pod)
    assert code == 2 and "cost" in err


def test_schedulerconfig_advises_bin_packing_a_weight_above_1_on_the_issues_cluster(tmp_path):
    # issue 16: 50 alike nodes, three running one pod each; at weight 1 LeastAllocated and
    # BalancedAllocation outvote the policy and an empty node wins
    from tests.schedmodel.test_advisor import _packing_cluster

    nodes, busy = _packing_cluster()
    cluster = tmp_path / "cluster.json"
    cluster.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [*nodes, *busy]}))
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web-0, namespace: default}\n"
        "spec:\n  schedulerName: schedweb\n  containers:\n  - name: app\n    image: nginx\n"
        "    resources: {requests: {cpu: 500m, memory: 1Gi}}\n"
    )
    code, out, err = run(
        "schedulerconfig",
        "--advise",
        str(EXAMPLES / "bin-packing.yaml"),
        "--pod",
        str(pod),
        "--cluster",
        str(cluster),
    )
    assert code == 0, err
    advised = int(out.splitlines()[-1].split("extender weight ")[1].split()[0])
    assert advised > 1
    assert "default/web-0: weight >= " in out


def test_schedulerconfig_advises_for_the_example_pods_by_default():
    code, out, _ = run("schedulerconfig", "--advise", str(EXAMPLES / "bin-packing.yaml"))
    assert code == 0
    assert "default/abc: " in out and out.splitlines()[-1].startswith("advice: ")


def test_evaluate_models_the_scheduler_configuration_given(tmp_path):
    config = tmp_path / "scheduler.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "extenders: [{urlPrefix: 'http://x/extender/', weight: 7}]\n"
    )
    args = [
        "--policy",
        str(EXAMPLES / "bin-packing.yaml"),
        "--pod",
        str(EXAMPLES / "pods/abc.yaml"),
    ]
    code, out, _ = run("evaluate", *args, "--json", "--scheduler-config", str(config))
    assert code == 0 and json.loads(out)["kubeScheduler"]["extenderWeight"] == 7
    config.write_text(
        "apiVersion: v1\nkind: KubeSchedulerConfiguration\nextenders: [{weight: x}]\n"
    )
    code, _, err = run("evaluate", *args, "--scheduler-config", str(config))
    assert code == 2
    assert "apiVersion: expected kubescheduler.config.k8s.io/v1" in err
    assert "extenders[0].weight: expected an integer, got 'x'" in err


def test_policy_test_models_the_configuration_schedulerconfig_prints_or_the_one_given(tmp_path):
    # where the pod lands depends on kube-scheduler's configuration: with the default
    # (LeastAllocated) abc lands on c-mem-1; packing (MostAllocated) sends it to a small node
    pod = (EXAMPLES / "pods" / "abc.yaml").read_text()
    document = (EXAMPLES / "seed-003-name-length.yaml").read_text() + (
        "tests:\n  - name: lands\n    cluster: demo\n"
        f"    pod: {json.dumps(yaml.safe_load(pod))}\n"
        "    expect: {landsIn: [c-mem-1], rejectedBy: {cp-1: TaintToleration}}\n"
    )
    path = tmp_path / "seed.yaml"
    path.write_text(document)
    assert run("policy", "test", str(path)) == (
        0,
        f"{path}: lands: ok\n1 of 1 test cases passed\n",
        "",
    )
    config = tmp_path / "packing.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n"
        "      scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 1}, "
        "{name: memory, weight: 1}]}\n"
    )
    code, out, _ = run("policy", "test", str(path), "--scheduler-config", str(config))
    assert code == 1
    assert "expected the pod to land in c-mem-1, but kube-scheduler picks one of " in out
    config.write_text("kind: KubeSchedulerConfiguration\nextenders: [{weight: x}]\n")
    code, out, err = run("policy", "test", str(path), "--scheduler-config", str(config))
    assert code == 2 and out == ""
    assert "extenders[0].weight: expected an integer, got 'x'" in err


# --- policy test reads only what it is given (issue 15) ------------------------------------


def _doc_with_case(cluster: str, pod: object = None) -> str:
    pod = (
        pod
        if pod is not None
        else {"metadata": {"name": "abc"}, "spec": {"schedulerName": "schedweb"}}
    )
    return (
        (EXAMPLES / "seed-003-name-length.yaml").read_text()
        + "\ntests:\n"
        + f"  - name: case\n    pod: {json.dumps(pod)}\n    cluster: {json.dumps(cluster)}\n"
        + "    expect: {winner: cp-1}\n"
    )


def _cluster_text() -> str:
    nodes, pods = demo_objects()
    items = [{"kind": "Node", **n} for n in nodes] + [{"kind": "Pod", **p} for p in pods]
    return json.dumps({"kind": "List", "items": items})


@pytest.mark.parametrize(
    ("cluster", "message"),
    [
        ("/dev/zero", "relative to the document's folder"),
        ("/etc/passwd", "relative to the document's folder"),
        ("../outside.json", "outside the document's folder"),
        ("sub/../../outside.json", "outside the document's folder"),
        ("link.json", "outside the document's folder"),  # a symlink leading out
        ("zero", "outside the document's folder"),  # a symlink to /dev/zero
        ("sub", "cannot read"),
        ("missing.json", "cannot read"),
    ],
)
def test_policy_test_reads_only_regular_files_inside_the_documents_folder(
    tmp_path, cluster, message
):
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (tmp_path / "outside.json").write_text(_cluster_text())
    (folder / "link.json").symlink_to(tmp_path / "outside.json")
    (folder / "zero").symlink_to("/dev/zero")
    path = folder / "p.yaml"
    path.write_text(_doc_with_case(cluster))
    code, out, _ = run("policy", "test", str(path))
    assert code == 1
    assert f"{path}: case: FAIL" in out
    assert message in out


def test_policy_test_reads_a_cluster_file_relative_to_the_document(tmp_path):
    (tmp_path / "clusters").mkdir()
    (tmp_path / "clusters" / "c.json").write_text(_cluster_text())
    path = tmp_path / "p.yaml"
    path.write_text(_doc_with_case("clusters/c.json"))
    code, out, _ = run("policy", "test", str(path))
    assert (code, out.splitlines()[-1]) == (0, "1 of 1 test cases passed")


def test_policy_test_refuses_a_cluster_file_over_the_size_limit(tmp_path, monkeypatch):
    from policies import evaluation

    monkeypatch.setattr(evaluation, "TEST_CLUSTER_MAX_BYTES", 1000)
    (tmp_path / "c.json").write_text(_cluster_text())
    path = tmp_path / "p.yaml"
    path.write_text(_doc_with_case("c.json"))
    code, out, _ = run("policy", "test", str(path))
    assert code == 1 and "larger than 1000 bytes" in out


@pytest.mark.parametrize("name", ["/dev/zero", "."])
def test_policy_commands_read_only_regular_files(name):
    for action in ("test", "import"):
        code, _, err = run("policy", action, name)
        assert code == 2 and f"{name}: cannot read" in err


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        ({"metadata": ["a"]}, "metadata: expected an object, got a list"),
        ({"metadata": "abc"}, "metadata: expected an object, got a string"),
        ({"metadata": {"name": "a", "labels": [1]}}, "metadata.labels: expected an object"),
        ({"metadata": {"name": "a"}, "spec": {"containers": "x"}}, "spec.containers"),
    ],
)
def test_policy_test_reports_a_malformed_pod_as_a_failure(tmp_path, pod, message):
    path = tmp_path / "p.yaml"
    path.write_text(_doc_with_case("demo", pod))
    code, out, _ = run("policy", "test", str(path))
    assert code == 1 and f"{path}: case: FAIL" in out and message in out


@pytest.mark.django_db
def test_hand_written_and_accepted_expectations_survive_export_import_and_policy_test(
    tmp_path, settings
):
    """Issue 12: hand-written kinds (winnerIn, score bounds, rejectedBy, verdicts) and accepted
    new results go out with `policy export`, come in elsewhere through the browser's import,
    and `policy test` runs them as tests (a bound the policy misses fails, saying so)."""
    import yaml
    from django.core.files.uploadedfile import SimpleUploadedFile

    from policies import services
    from policies.models import Policy
    from tests.conftest import client_for, make_user

    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    source = EXAMPLES / "seed-003-name-length.yaml"
    run("policy", "import", str(source))
    policy = Policy.objects.get(name="seed-003-name-length")
    editor = make_user("ed", "editor")
    short = "metadata: {name: abc, namespace: default}\nspec: {schedulerName: schedweb}\n"
    long = "metadata: {name: abcdefg, namespace: default}\nspec: {schedulerName: schedweb}\n"
    # 20 - size(name), minmax over the demo nodes: cp-1 (16) 100 -> 10, a-gpu-1 (13) between
    # the longest (worker-medium-a-1, 3) and cp-1: (13-3)/(16-3) = 76.9 -> 8
    hand = {
        "winnerIn": ["cp-1", "a-gpu-1"],
        "scores": {"cp-1": {"atLeast": 9}, "a-gpu-1": {"atLeast": 7, "atMost": 9}},
        "verdicts": {"a-small-1": "pass"},
    }
    for name, pod, expect in (
        ("short-names-win", short, hand),
        ("long-pod", long, {"rejectedBy": {"cp-1": "an-old-rule-name"}}),
    ):
        services.test_case_create(
            actor=editor, policy=policy, name=name, pod=pod, cluster="demo", expect=expect
        )
    accepted = services.test_cases_accept(
        actor=editor, policy=policy, revision=policy.draft_revision
    )
    assert accepted == [
        {
            "name": "long-pod",
            "expect": {"rejectedBy": {"cp-1": "short-pod-name"}},
            "changes": [
                {
                    "path": "rejectedBy.cp-1",
                    "old": "an-old-rule-name",
                    "new": "short-pod-name",
                }
            ],
        }
    ]
    exported = tmp_path / "exported.yaml"
    assert run("policy", "export", policy.name, "-o", str(exported))[0] == 0
    tests = {t["name"]: t["expect"] for t in yaml.safe_load(exported.read_text())["tests"]}
    assert tests == {
        "short-names-win": hand,
        "long-pod": {"rejectedBy": {"cp-1": "short-pod-name"}},
    }

    policy.delete()  # elsewhere: no such policy, no recorded cases
    answer = client_for("editor", "importer").post(
        "/policies/import",
        {"file": SimpleUploadedFile("p.yaml", exported.read_bytes())},
        follow=True,
    )
    assert b"(2 test cases in it)" in answer.content
    again = tmp_path / "again.yaml"
    assert run("policy", "export", policy.name, "-o", str(again))[0] == 0
    assert again.read_text() == exported.read_text()
    code, out, _ = run("policy", "test", str(again))
    assert code == 0 and out.splitlines()[-1] == "2 of 2 test cases passed"

    data = yaml.safe_load(again.read_text())
    [case] = [t for t in data["tests"] if t["name"] == "short-names-win"]
    case["expect"]["scores"]["a-gpu-1"]["atMost"] = 7
    case["expect"]["winnerIn"] = ["a-gpu-1"]
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(data, sort_keys=False))
    code, out, _ = run("policy", "test", str(broken))
    assert code == 1
    assert "node a-gpu-1: expected policy score at least 7 and at most 7, got 8" in out
    assert (
        "expected the policy's top node (policy-level winnerIn) among a-gpu-1, got cp-1 "
        "(policy total 100.00)"
    ) in out


def test_evaluate_says_what_admission_added_and_prints_the_failed_scheduling_message(tmp_path):
    # a pod written without tolerations, limits only, asking more cpu than any demo node has:
    # judged as stored (requests from limits, the two default NoExecute tolerations) and
    # unschedulable, with kube-scheduler's whole message
    pod = tmp_path / "big.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: big}\nspec:\n"
        "  containers: [{name: c, image: x, resources: {limits: {cpu: '500'}}}]\n"
    )
    policy = str(EXAMPLES / "seed-003-name-length.yaml")
    code, out, _ = run("evaluate", "--policy", policy, "--pod", str(pod))
    assert code == 0
    assert (
        "added by API admission: spec.containers[0].resources.requests.cpu: 500 (its limit); "
        "spec.tolerations: node.kubernetes.io/not-ready:NoExecute for 300s; "
        "spec.tolerations: node.kubernetes.io/unreachable:NoExecute for 300s"
    ) in out
    failed = next(line for line in out.splitlines() if line.startswith("FailedScheduling: "))
    assert failed.startswith("FailedScheduling: 0/36 nodes are available: ")
    assert "Insufficient cpu" in failed and failed.endswith(
        "Preemption is not helpful for scheduling."
    )
    # the answer states why with that message, whole (not an approximation of it)
    message = failed.removeprefix("FailedScheduling: ")
    assert out.splitlines()[2] == f"answer: unschedulable: {message}"
    code, out, _ = run("evaluate", "--policy", policy, "--pod", str(pod), "--json")
    data = json.loads(out)
    assert (
        data["admissionDefaults"][0] == "spec.containers[0].resources.requests.cpu: 500 (its limit)"
    )
    assert data["kubeScheduler"]["failedScheduling"] == failed.removeprefix("FailedScheduling: ")
    assert data["kubeScheduler"]["pick"] == []
    assert data["answer"]["outcome"] == "unschedulable"
    assert data["answer"]["failedScheduling"] == data["kubeScheduler"]["failedScheduling"]
    assert data["answer"]["summary"] == f"unschedulable: {message}"
