"""Answering kube-apiserver's AdmissionReview for pods: the queue key as the pod's priority.

Verified against kube-apiserver v1.35.8 (tests/e2e/test_queue_admission.py, docs/policies.md):
the built-in Priority admission plugin runs before mutating webhooks and again after a webhook
changed the object, and then refuses a pod whose `spec.priority` or `spec.preemptionPolicy`
differ from what its `priorityClassName` gives ("the integer value of priority (0) must not be
provided in pod spec; priority admission controller computed 7 ...") or whose class does not
exist. So the patch sets all three together, and only to a class the worker has created:
either the pod is admitted with the whole mutation or, under Fail, refused - never half.

Answers come from process memory (the active policies, the snapshot's namespace labels, the
classes the worker reported), like the extender's; nothing here imports Django or kubernetes.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from policies.cluster.convert import ConversionError, pod_view

from .classes import PREEMPTION_POLICY, class_name
from .workloads import MODE_WORKLOAD, workload_ref

PATH = "/admission/queue"


class ReviewInvalid(ValueError):
    """The body is not an AdmissionReview for a pod (400)."""


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes
    policy: str = ""  # X-Schedweb-Policy: which active version decided


def _review(uid: str, response: dict[str, Any]) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": uid, **response},
        }
    )


def _refuse(uid: str, message: str) -> dict[str, Any]:
    return {"allowed": False, "status": {"code": 403, "reason": "Forbidden", "message": message}}


def admission_answer(
    body: bytes,
    *,
    policies: Mapping[str, Any],
    namespace_labels: Callable[[str], Mapping[str, str] | None],
    class_ready: Callable[[int], bool],
    gang_mode: str = "",
) -> Answer:
    """The AdmissionReview answer for `body`.

    `policies` maps schedulerName -> ServedPolicy (the extender's registry); a pod whose
    schedulerName no active policy with `queue:` or `gang:` targets is allowed unchanged.
    A key's patch needs its PriorityClass to exist (`class_ready`); without it, and on an
    evaluation error, the policy's failurePolicy decides: Ignore admits the pod unchanged (no
    part of the patch), Fail refuses it. With `gang_mode` "workload" (the cluster serves the
    Workload API), a gang member also gets `spec.workloadRef` to its group's Workload.
    """
    review = _parse(body)
    request, uid, obj = review["request"], review["request"]["uid"], review["request"]["object"]
    kind = request.get("kind")
    if (
        not isinstance(kind, dict)
        or kind.get("kind") != "Pod"
        or request.get("operation") != "CREATE"
    ):
        return Answer(200, _review(uid, {"allowed": True}))
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    scheduler_name = spec.get("schedulerName") or "default-scheduler"
    served = policies.get(scheduler_name) if isinstance(scheduler_name, str) else None
    if served is None or (served.compiled.spec.queue is None and served.compiled.spec.gang is None):
        return Answer(200, _review(uid, {"allowed": True}))
    compiled = served.compiled
    given = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    namespace = request.get("namespace") or given.get("namespace") or ""
    if not isinstance(namespace, str):
        raise ReviewInvalid("request.namespace must be a string")
    metadata = {**given, "namespace": namespace}
    metadata.setdefault("name", metadata.get("generateName") or "")
    fail = compiled.spec.failure_policy == "Fail"
    try:
        pod = pod_view({**obj, "metadata": metadata})
    except ConversionError as exc:
        return _decide(uid, served, fail, f"the pod cannot be read: {exc}")
    labels = namespace_labels(namespace)
    patch: list[dict[str, Any]] = []
    if compiled.spec.queue is not None:
        key = compiled.queue_key(pod, labels)
        if key.error:
            return _decide(uid, served, fail, key.reason)
        if key.key is not None:
            if not class_ready(key.key):
                return _decide(
                    uid,
                    served,
                    fail,
                    f"PriorityClass {class_name(key.key)} (queue key {key.key}) does not exist "
                    "yet; schedweb's worker creates it",
                )
            patch += [
                {"op": "add", "path": "/spec/priorityClassName", "value": class_name(key.key)},
                {"op": "add", "path": "/spec/priority", "value": key.key},
                {"op": "add", "path": "/spec/preemptionPolicy", "value": PREEMPTION_POLICY},
            ]
    if (
        compiled.spec.gang is not None
        and gang_mode == MODE_WORKLOAD
        and not spec.get("workloadRef")
    ):
        gang = compiled.gang_of(pod, labels)
        if gang.error:
            return _decide(uid, served, fail, gang.reason)
        if gang.member:
            patch.append(
                {"op": "add", "path": "/spec/workloadRef", "value": workload_ref(gang.group)}
            )
    if not patch:
        return Answer(200, _review(uid, {"allowed": True}), served.label)
    response = {
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": base64.b64encode(orjson.dumps(patch)).decode(),
    }
    return Answer(200, _review(uid, response), served.label)


def _parse(body: bytes) -> dict[str, Any]:
    """The review, with request.uid a string and request.object an object; ReviewInvalid
    (400) otherwise. Bodies come from kube-apiserver, but the listener is reachable by any
    holder of a client certificate: no shape may make it fail with a 500."""
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ReviewInvalid(f"not an AdmissionReview: {exc}") from None
    request = review.get("request") if isinstance(review, dict) else None
    if not isinstance(request, dict):
        raise ReviewInvalid("not an AdmissionReview: request must be an object")
    if not isinstance(request.get("uid"), str):
        raise ReviewInvalid("not an AdmissionReview: request.uid must be a string")
    if not isinstance(request.get("object"), dict):
        raise ReviewInvalid("not an AdmissionReview: request.object must be an object")
    return review


def _decide(uid: str, served: Any, fail: bool, reason: str) -> Answer:
    """No key for the pod: admitted unchanged (Ignore) or refused with the reason (Fail)."""
    if fail:
        message = f"schedweb policy {served.label} (failurePolicy Fail): {reason}"
        return Answer(200, _review(uid, _refuse(uid, message)), served.label)
    return Answer(200, _review(uid, {"allowed": True}), served.label)


def invalid_answer(message: str) -> Answer:
    return Answer(400, orjson.dumps({"error": "bad_request", "detail": message}))
