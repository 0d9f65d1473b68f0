"""The queue webhook (POST /admission/queue on the extender's listener): a pod of a policy with
`queue:` gets the PriorityClass, priority and preemptionPolicy of its key in one JSON patch, or,
when it cannot, the policy's failurePolicy decides (Ignore: unchanged; Fail: refused)."""

from __future__ import annotations

import base64

import orjson
import pytest

from policies.admission.classes import class_manifest, class_name
from policies.admission.review import ReviewInvalid, admission_answer
from policies.engine.policy import compile_policy
from policies.extender.service import ServedPolicy
from policies.queue_classes import queue_classes_record
from tests.asgiclient import asgi_request

from .conftest import example, runtime_by_hand

SEED = example("seed-002-queue")
FAIL = SEED.replace("failurePolicy: Ignore", "failurePolicy: Fail")


def served(document: str = SEED) -> dict[str, ServedPolicy]:
    policy = ServedPolicy("seed-002-queue", 3, compile_policy(document))
    return {name: policy for name in policy.compiled.spec.scheduler_names}


def review(
    *,
    labels: dict | None = None,
    scheduler: str = "schedweb",
    qos: str = "Guaranteed",
    namespace: str = "default",
    operation: str = "CREATE",
) -> bytes:
    resources = {"cpu": "1", "memory": "1Gi"}
    container = {"name": "c", "image": "x"}
    if qos == "Guaranteed":
        container["resources"] = {"requests": resources, "limits": resources}
    elif qos == "Burstable":
        container["resources"] = {"requests": resources}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        # a pod named by generateName has no name yet at admission; the namespace may be absent
        "metadata": {"generateName": "train-", "labels": labels or {}},
        "spec": {"schedulerName": scheduler, "containers": [container], "priority": 0},
    }
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": namespace,
                "operation": operation,
                "object": pod,
            },
        }
    )


def answer(body: bytes, *, policies=None, ready=lambda value: True, labels=None):
    result = admission_answer(
        body,
        policies=served() if policies is None else policies,
        namespace_labels=lambda namespace: labels,
        class_ready=ready,
    )
    response = orjson.loads(result.body)["response"]
    assert response["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
    return result, response


def patch_of(response: dict) -> list[dict]:
    assert response["patchType"] == "JSONPatch"
    return orjson.loads(base64.b64decode(response["patch"]))


@pytest.mark.parametrize(
    ("labels", "qos", "key"),
    [
        ({"groupPriority": "9"}, "Guaranteed", 29),  # 9*3 + 2
        ({"groupPriority": "4"}, "Burstable", 13),  # 4*3 + 1
        ({}, "BestEffort", 0),  # 0*3 + 0
    ],
)
def test_a_pod_of_the_policy_gets_class_priority_and_preemption_policy_together(labels, qos, key):
    result, response = answer(review(labels=labels, qos=qos))
    assert result.status == 200 and result.policy == "seed-002-queue/v3"
    assert response["allowed"] is True
    # all three: kube-apiserver's Priority admission runs again after the webhook and refuses
    # a pod whose priority or preemptionPolicy differ from its class's
    assert patch_of(response) == [
        {"op": "add", "path": "/spec/priorityClassName", "value": f"schedweb-queue-{key}"},
        {"op": "add", "path": "/spec/priority", "value": key},
        {"op": "add", "path": "/spec/preemptionPolicy", "value": "Never"},
    ]


def test_pods_of_other_schedulers_and_policies_without_queue_are_allowed_unchanged():
    _, response = answer(review(scheduler="default-scheduler", labels={"groupPriority": "9"}))
    assert response == {"uid": response["uid"], "allowed": True}
    no_queue = served(example("seed-002-gang"))
    _, response = answer(review(labels={"groupPriority": "9"}), policies=no_queue)
    assert "patch" not in response and response["allowed"] is True
    _, response = answer(review(operation="UPDATE"))
    assert "patch" not in response and response["allowed"] is True


def test_a_missing_priority_class_is_ignored_or_refused_by_failure_policy():
    _, response = answer(review(labels={"groupPriority": "1"}), ready=lambda value: False)
    assert response["allowed"] is True and "patch" not in response  # Ignore: unchanged
    _, response = answer(
        review(labels={"groupPriority": "1"}), policies=served(FAIL), ready=lambda v: False
    )
    assert response["allowed"] is False and "patch" not in response
    assert response["status"]["message"] == (
        "schedweb policy seed-002-queue/v3 (failurePolicy Fail): PriorityClass schedweb-queue-5 "
        "(queue key 5) does not exist yet; schedweb's worker creates it"
    )


def test_an_evaluation_error_is_ignored_or_refused_with_the_cel_error():
    broken = SEED.replace(
        'pod.labels.groupPriority.matches("^[0-9]$")', "int(pod.labels.groupPriority) >= 0"
    )
    body = review(labels={"groupPriority": "high"})
    _, response = answer(body, policies=served(broken))
    assert response["allowed"] is True and "patch" not in response
    _, response = answer(
        body, policies=served(broken.replace("failurePolicy: Ignore", "failurePolicy: Fail"))
    )
    assert response["allowed"] is False
    assert response["status"]["message"].startswith(
        "schedweb policy seed-002-queue/v3 (failurePolicy Fail): queue key could not be evaluated:"
    )
    assert "'high'" in response["status"]["message"]


def test_namespace_labels_come_from_the_snapshot():
    document = SEED.replace(
        '(pod.qosClass == "Guaranteed" ? 2 : pod.qosClass == "Burstable" ? 1 : 0)',
        '(namespaceObject.labels.env == "production" ? 2 : 0)',
    )
    _, response = answer(review(), policies=served(document), labels={"env": "production"})
    assert patch_of(response)[1]["value"] == 2


@pytest.mark.parametrize(
    "body",
    [b"", b"[]", b'{"request": {}}', b'{"request": {"uid": 1, "object": {}}}', b"{bad"],
)
def test_a_body_that_is_not_an_admission_review_is_refused(body):
    with pytest.raises(ReviewInvalid):
        admission_answer(body, policies={}, namespace_labels=dict.get, class_ready=bool)


def test_negative_keys_have_their_own_class_names():
    assert class_name(-3) == "schedweb-queue-neg-3" and class_name(3) == "schedweb-queue-3"
    manifest = class_manifest(-3)
    assert manifest["value"] == -3 and manifest["preemptionPolicy"] == "Never"
    assert manifest["globalDefault"] is False


# --- through the extender's listener --------------------------------------------------------


def test_the_listener_answers_from_the_published_policies_and_the_recorded_classes(publish):
    publish(SEED)
    body = review(labels={"groupPriority": "2"})  # 2*3 + 2 = 8
    response = asgi_request("POST", "/admission/queue", body, app="extender")
    assert response.status_code == 200 and response["X-Schedweb-Policy"] == "seed-002-queue/v1"
    assert "patch" not in response.json()["response"]  # no class recorded yet: Ignore
    queue_classes_record([(0, 29)])
    # What the runtime's thread does every 100 ms, done here: a round of its that read Redis
    # before the record cannot then put back what it read.
    runtime_by_hand()._refresh_classes()
    response = asgi_request("POST", "/admission/queue", body, app="extender")
    assert patch_of(response.json()["response"])[0]["value"] == "schedweb-queue-8"


def test_the_listener_refuses_bad_requests_to_the_webhook(extender_redis):
    assert asgi_request("POST", "/admission/queue", b"{bad", app="extender").status_code == 400
    assert asgi_request("GET", "/admission/queue", app="extender").status_code == 405
    response = asgi_request(
        "POST", "/admission/queue", b"{}", app="extender", content_type=b"text/plain"
    )
    assert response.status_code == 415
    big = b'{"x": "' + b"a" * (200 * 1024) + b'"}'
    assert asgi_request("POST", "/admission/queue", big, app="extender").status_code == 413
    # the web listener does not serve the webhook
    assert asgi_request("POST", "/admission/queue", b"{}", app="web").status_code != 200


# --- gangs ---------------------------------------------------------------------------------

GANG = "name: seed-002-queue\nschedulerNames: [schedweb]\ngang: {}\n"


def test_gang_members_are_linked_to_their_workload_only_in_workload_mode():
    body = review(labels={"podGroup": "train", "minAvailable": "4"}, qos="Burstable")
    _, response = answer_with_mode(body, "workload")
    assert patch_of(response) == [
        {
            "op": "add",
            "path": "/spec/workloadRef",
            "value": {"name": "schedweb-train", "podGroup": "members"},
        }
    ]
    _, response = answer_with_mode(body, "hold")  # no Workload API: the filter holds them
    assert "patch" not in response and response["allowed"] is True
    lone = review(labels={"podGroup": "train", "minAvailable": "1"})
    assert "patch" not in answer_with_mode(lone, "workload")[1]


def test_a_queue_key_and_a_workload_ref_come_in_one_patch():
    both = SEED.replace("tests:", "gang: {}\ntests:", 1)
    body = review(labels={"podGroup": "Train_A", "minAvailable": "3", "groupPriority": "1"})
    _, response = answer_with_mode(body, "workload", document=both)
    ops = patch_of(response)
    assert [op["path"] for op in ops] == [
        "/spec/priorityClassName",
        "/spec/priority",
        "/spec/preemptionPolicy",
        "/spec/workloadRef",
    ]
    # a group that is not a valid object name gets a stable hashed one
    assert ops[3]["value"]["name"].startswith("schedweb-") and "_" not in ops[3]["value"]["name"]


def answer_with_mode(body: bytes, mode: str, *, document: str = GANG):
    result = admission_answer(
        body,
        policies=served(document),
        namespace_labels=lambda namespace: {},
        class_ready=lambda value: True,
        gang_mode=mode,
    )
    return result, orjson.loads(result.body)["response"]


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r["request"].update(kind="Pod"),
        lambda r: r["request"].update(namespace=["a"]),
        lambda r: r["request"]["object"].update(metadata=["x"]),
        lambda r: r["request"]["object"].update(spec=["x"]),
        lambda r: r["request"]["object"]["spec"].update(schedulerName=["schedweb"]),
        lambda r: r["request"]["object"]["spec"].update(containers="c"),
        lambda r: r["request"]["object"]["metadata"].update(labels=["a"]),
        lambda r: r["request"]["object"]["spec"].update(priority="high"),
    ],
)
def test_hostile_shapes_get_an_answer_never_an_exception(mutate):
    review_json = orjson.loads(review(labels={"podGroup": "g", "minAvailable": "2"}))
    mutate(review_json)
    body = orjson.dumps(review_json)
    for document in (FAIL, GANG):
        try:
            result = admission_answer(
                body,
                policies=served(document),
                namespace_labels=lambda namespace: {},
                class_ready=lambda value: True,
                gang_mode="workload",
            )
        except ReviewInvalid:
            continue  # a 400 with the reason
        assert result.status == 200
        response = orjson.loads(result.body)["response"]
        assert response["allowed"] in (True, False)


@pytest.mark.django_db
def test_webhook_answers_need_no_database_query(publish, queries_anywhere):
    publish(example("seed-002"))
    queue_classes_record([(0, 29)])
    runtime_by_hand()._refresh_classes()
    body = review(labels={"groupPriority": "4", "podGroup": "g", "minAvailable": "3"})
    for _ in range(3):
        response = asgi_request("POST", "/admission/queue", body, app="extender")
        assert patch_of(response.json()["response"])[0]["value"] == "schedweb-queue-14"
    assert queries_anywhere == []
