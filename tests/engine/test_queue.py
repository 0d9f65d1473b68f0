"""The `queue:` section: validation, the key of a pod, and the order pending pods take."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.engine.document import PolicyInvalid
from policies.engine.policy import compile_policy
from policies.engine.queue import QueueKey, queue_order
from policies.engine.testcases import check_expectations, expect_problems
from tests.engine.inputs import pod_view

SEED = (Path(__file__).resolve().parents[2] / "policies/examples/seed-002-queue.yaml").read_text()
HEAD = "name: q\nschedulerNames: [schedweb]\n"


def errors_of(text: str) -> list[tuple[str, str, int | None, int | None]]:
    with pytest.raises(PolicyInvalid) as caught:
        compile_policy(text)
    return [(e.path, e.message, e.line, e.column) for e in caught.value.errors]


@pytest.mark.parametrize(
    ("labels", "qos", "key"),
    [
        ({"groupPriority": "9"}, "Guaranteed", 29),  # 9*3 + 2
        ({"groupPriority": "9"}, "BestEffort", 27),  # 9*3 + 0
        ({"groupPriority": "3"}, "Burstable", 10),  # 3*3 + 1
        ({"groupPriority": "0"}, "Guaranteed", 2),  # 0*3 + 2
        ({}, "Burstable", 1),  # no label counts as 0: 0*3 + 1
        ({"groupPriority": "high"}, "Guaranteed", 2),  # not a digit: 0 (the seed's ParseInt)
    ],
)
def test_seed_002_keys_order_by_group_priority_then_qos(labels, qos, key):
    policy = compile_policy(SEED)
    result = policy.queue_key({**pod_view(labels=labels), "qosClass": qos}, {})
    assert result == QueueKey(key, key)


def test_a_key_outside_min_max_is_clamped_and_says_so():
    policy = compile_policy(HEAD + "queue: {expression: 'int(pod.labels.p)', min: -5, max: 5}\n")
    high = policy.queue_key(pod_view(labels={"p": "40"}))
    low = policy.queue_key(pod_view(labels={"p": "-40"}))
    assert (high.key, high.raw, high.clamped) == (5, 40, True)
    assert (low.key, low.raw, low.clamped) == (-5, -40, True)
    assert policy.queue_key(pod_view(labels={"p": "3"})).clamped is False


def test_namespace_labels_are_readable_as_namespace_object():
    policy = compile_policy(
        HEAD
        + "queue:\n  expression: >-\n    namespaceObject.labels.env == 'production' ? 10 : 0\n"
        + "  min: 0\n  max: 10\n"
    )
    assert policy.queue_key(pod_view(), {"env": "production"}).key == 10
    assert policy.queue_key(pod_view(), {"env": "dev"}).key == 0
    # a namespace without labels: the selection fails, the result is an error, not a key
    missing = policy.queue_key(pod_view(), None)
    assert missing.key is None and missing.error and "env" in missing.reason


def test_pods_of_other_schedulers_or_failing_match_conditions_get_no_key():
    policy = compile_policy(
        HEAD
        + "matchConditions: [{name: batch, expression: 'pod.namespace == \"batch\"'}]\n"
        + "queue: {expression: '7', min: 0, max: 9}\n"
    )
    other = policy.queue_key(pod_view(namespace="batch", scheduler_name="default-scheduler"))
    assert other.key is None and not other.error and "not targeted" in other.reason
    unmatched = policy.queue_key(pod_view(namespace="web"))
    assert unmatched.key is None and not unmatched.error and "batch is false" in unmatched.reason
    assert policy.queue_key(pod_view(namespace="batch")).key == 7


def test_an_evaluation_error_is_a_keyless_error_result():
    policy = compile_policy(HEAD + "queue: {expression: 'int(pod.labels.p)', min: 0, max: 9}\n")
    result = policy.queue_key(pod_view(labels={"p": "x"}))
    assert result.key is None and result.error
    assert result.reason.startswith("queue key could not be evaluated:")


def test_a_dyn_expression_giving_a_string_is_an_error_at_evaluation():
    policy = compile_policy(
        HEAD + "queue: {expression: 'pod.object.metadata.name', min: 0, max: 9}\n"
    )
    result = policy.queue_key(pod_view())
    assert result.error and result.reason == "queue key must evaluate to an int, got string"


def test_a_policy_with_only_a_queue_is_valid_and_without_anything_is_refused():
    assert compile_policy(HEAD + "queue: {expression: '1', min: 0, max: 1}\n").filters == []
    assert errors_of(HEAD) == [
        ("", "a policy needs at least one filter, score or queue", None, None)
    ]


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        (
            "queue: {expression: 'pod.name', min: 0, max: 3}",
            [("queue.expression", "expected int, got string", 1, 1)],
        ),
        (
            "queue: {expression: 'pod.priority +', min: 0, max: 3}",
            [("queue.expression", "missing operand after '+'", 1, 15)],
        ),
        (
            "queue: {expression: 'node.name.size()', min: 0, max: 3}",
            [("queue.expression", "undeclared reference 'node'; did you mean 'pod'?", 1, 1)],
        ),
        (
            "queue: {expression: '1', min: 5, max: 3}",
            [("queue.max", "max (3) is below min (5)", None, None)],
        ),
        (
            "queue: {expression: '1', min: 0, max: 100000}",
            [
                (
                    "queue.max",
                    "min..max spans 100001 keys; at most 1000 (one PriorityClass each)",
                    None,
                    None,
                )
            ],
        ),
        (
            "queue: {expression: '1', min: 0, max: 2000000000}",
            [
                (
                    "queue.max",
                    "max must be from -1000000000 to 1000000000 (a key is a pod priority), got 2000000000",
                    None,
                    None,
                )
            ],
        ),
        (
            "queue: {expression: '1', min: '0', max: true}",
            [
                ("queue.min", "min must be an integer, got string", None, None),
                ("queue.max", "max must be an integer, got boolean", None, None),
            ],
        ),
        (
            "queue: {expression: '1', priority: 3}",
            [
                ("queue.priority", "unknown field 'priority'", None, None),
                ("queue.min", "min is required: the lowest key (an integer)", None, None),
                ("queue.max", "max is required: the highest key (an integer)", None, None),
            ],
        ),
        (
            "queue: [1]",
            [("queue", "queue must be a mapping (expression, min, max), got list", None, None)],
        ),
        (
            # bad bounds do not hide the expression's own error: both at once
            "queue: {expression: '\"a\"', min: 3, max: 1}",
            [
                ("queue.max", "max (1) is below min (3)", None, None),
                ("queue.expression", "expected int, got string", 1, 1),
            ],
        ),
    ],
)
def test_queue_sections_are_validated_with_field_paths_and_positions(section, expected):
    assert errors_of(HEAD + section + "\n") == expected


def test_cel_errors_in_a_block_expression_point_at_their_document_line():
    text = (
        HEAD + "queue:\n  expression: |\n    pod.priority +\n      pod.nmae\n  min: 0\n  max: 3\n"
    )
    with pytest.raises(PolicyInvalid) as caught:
        compile_policy(text)
    (error,) = caught.value.errors
    assert error.message == "undefined field 'nmae' on Pod; did you mean 'name'?"
    assert (error.path, error.line, error.column) == ("queue.expression", 2, 7)
    assert (error.doc_line, error.doc_column) == (6, 11)  # `nmae` in the document


def test_queue_order_is_by_key_then_creation_and_keyless_pods_keep_their_priority():
    def pod(name, created, priority=0):
        view = pod_view(name)
        return {
            **view,
            "priority": priority,
            "object": {"metadata": {"name": name, "creationTimestamp": created}},
        }

    rows = [
        (pod("late-high", "2026-01-01T00:00:09Z"), QueueKey(20, 20)),
        (pod("early-low", "2026-01-01T00:00:01Z"), QueueKey(1, 1)),
        (pod("early-high", "2026-01-01T00:00:02Z"), QueueKey(20, 20)),
        (pod("own-priority", "2026-01-01T00:00:00Z", priority=5), QueueKey(None)),
    ]
    assert [p["name"] for p, _ in queue_order(rows)] == [
        "early-high",  # 20, created before late-high
        "late-high",  # 20
        "own-priority",  # no key: its own priority 5
        "early-low",  # 1
    ]


def test_test_cases_can_expect_a_queue_key_or_none():
    assert expect_problems({"queueKey": 3}) == []
    assert expect_problems({"queueKey": None}) == []
    assert expect_problems({"queueKey": "3"}) == [
        "expect.queueKey: must be an integer or null, got a string"
    ]
    assert expect_problems({"queueKey": True}) == [
        "expect.queueKey: must be an integer or null, got a boolean"
    ]
    policy = compile_policy(SEED)
    evaluation = policy.evaluate(pod_view(), [])
    key = policy.queue_key(pod_view(labels={"groupPriority": "2"}))  # 2*3 + 1 = 7
    assert check_expectations(evaluation, {"queueKey": 7}, key) == []
    assert check_expectations(evaluation, {"queueKey": 8}, key) == ["expected queue key 8, got 7"]
    none = policy.queue_key(pod_view(scheduler_name="other"))
    assert check_expectations(evaluation, {"queueKey": 1}, none) == [
        "expected queue key 1, got None (spec.schedulerName 'other' is not targeted by this policy)"
    ]


# --- gang: ---------------------------------------------------------------------------------


def test_gang_defaults_to_seed_002s_labels():
    policy = compile_policy(HEAD + "gang: {}\n")
    member = policy.gang_of(pod_view(labels={"podGroup": "train", "minAvailable": "4"}))
    assert (member.group, member.min_count, member.member) == ("train", 4, True)
    # the seed held no pod with minAvailable <= 1, nor one whose minAvailable is not a number
    for labels in (
        {"podGroup": "t", "minAvailable": "1"},
        {"podGroup": "t", "minAvailable": "x"},
        {},
    ):
        assert policy.gang_of(pod_view(labels=labels)).member is False
    assert policy.gang_of(pod_view(scheduler_name="other")).reason.startswith("spec.schedulerName")


def test_gang_reads_any_cel_over_the_pod_and_its_namespace():
    policy = compile_policy(
        HEAD
        + "gang:\n  group: pod.ownerName\n"
        + "  minCount: 'namespaceObject.labels.team == \"data\" ? 8 : 2'\n"
    )
    pod = {**pod_view(), "ownerName": "job-1"}
    assert policy.gang_of(pod, {"team": "data"}).min_count == 8
    assert policy.gang_of(pod, {}).error  # labels.team absent: an error, not a guess


def test_gang_sections_are_validated():
    assert errors_of(HEAD + "gang: {group: '1', minCount: pod.name, size: 3}\n") == [
        ("gang.size", "unknown field 'size'", None, None),
        ("gang.group", "expected string, got int", 1, 1),
        ("gang.minCount", "expected int, got string", 1, 1),
    ]
    assert errors_of(HEAD + "gang: [1]\n") == [
        ("gang", "gang must be a mapping (group, minCount), got list", None, None)
    ]


def test_the_docs_seed_002_pods_get_the_keys_and_gangs_the_docs_state():
    import re

    from policies.cluster.manifest import pod_view_from_source

    docs = (Path(__file__).resolve().parents[2] / "docs/policies.md").read_text()
    section = docs[docs.index("## 5d. Seed 002") : docs.index("## 6. Test cases")]
    pods = {}
    for block in re.findall(r"```yaml\n(.*?)```", section, re.S):
        if "kind: Pod" in block:
            view = pod_view_from_source(block)
            pods[view["name"]] = view
    policy = compile_policy(SEED.replace("name: seed-002-queue", "name: seed-002"))
    full = compile_policy(
        (Path(__file__).resolve().parents[2] / "policies/examples/seed-002.yaml").read_text()
    )
    assert policy.queue_key(pods["train-0"]).key == full.queue_key(pods["train-0"]).key == 16
    assert full.queue_key(pods["urgent"]).key == 29
    gang = full.gang_of(pods["train-0"])
    assert (gang.group, gang.min_count, gang.member) == ("train", 4, True)
    assert "train-0 gets key 5 * 3 + 1 = 16" in section and "urgent gets 9 * 3 + 2 = 29" in section
