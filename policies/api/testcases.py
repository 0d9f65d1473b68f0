"""REST API views of a policy's test cases: list and add, read, change and delete one, run them,
accept their current results as expectations. One class per operation, as views.py."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
)
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from policies import services
from policies.engine.testcases import expect_canonical
from policies.evaluation import (
    policy_compile,
    request_guard,
    test_cases_run,
)
from policies.models import PolicyTestCase

from . import serializers as s
from .views import ApiView, _found, _iso, _policy, errors


def test_case_dict(case: PolicyTestCase) -> dict[str, Any]:
    return {
        "name": case.name,
        "pod": case.pod,
        "cluster": case.cluster,
        "expect": expect_canonical(case.expect),
        "createdAt": _iso(case.created_at),
    }


def _manifest_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    import yaml

    return yaml.safe_dump(value, sort_keys=False)


class TestCaseListCreate(ApiView):
    required_roles = {"GET": "viewer", "POST": "editor"}

    @extend_schema(
        operation_id="tests_list", responses={200: s.TestCaseSerializer(many=True), **errors(404)}
    )
    def get(self, request: Request, name: str) -> Response:
        policy = _policy(name)
        return Response([test_case_dict(c) for c in policy.test_cases.all()])

    @extend_schema(
        operation_id="tests_create",
        request=s.TestCaseWriteSerializer,
        responses={201: s.TestCaseSerializer, **errors(400, 404, 409, 413)},
    )
    def post(self, request: Request, name: str) -> Response:
        policy = _policy(name)
        data = self.data(s.TestCaseWriteSerializer, request)
        case = services.test_case_create(
            actor=request.user,
            policy=policy,
            name=data["name"],
            pod=_manifest_text(data["pod"]),
            cluster=data.get("cluster", ""),
            expect=data["expect"],
        )
        return Response(test_case_dict(case), status=status.HTTP_201_CREATED)


class TestCaseDetail(ApiView):
    required_roles = {"GET": "viewer", "PUT": "editor", "PATCH": "editor", "DELETE": "editor"}

    def _case(self, name: str, case: str) -> PolicyTestCase:
        _policy(name)  # an unknown policy says so, not "no test case"
        return _found(
            PolicyTestCase.objects.select_related("policy"),
            f"test case {case!r} in policy {name!r}",
            policy__name=name,
            name=case,
        )

    @extend_schema(
        operation_id="tests_retrieve", responses={200: s.TestCaseSerializer, **errors(404)}
    )
    def get(self, request: Request, name: str, case: str) -> Response:
        return Response(test_case_dict(self._case(name, case)))

    @extend_schema(
        operation_id="tests_update",
        request=s.TestCaseUpdateSerializer,
        responses={200: s.TestCaseSerializer, **errors(400, 404, 413)},
    )
    def put(self, request: Request, name: str, case: str) -> Response:
        found = self._case(name, case)
        data = self.data(s.TestCaseUpdateSerializer, request)
        updated = services.test_case_update(
            actor=request.user,
            case=found,
            pod=_manifest_text(data["pod"]),
            cluster=data.get("cluster", ""),
            expect=data["expect"],
        )
        return Response(test_case_dict(updated))

    @extend_schema(
        operation_id="tests_partial_update",
        description="Edits a test case: its expectation written by hand (or its pod or "
        "cluster); what is left out is kept. Each problem of the expectation is a 400 naming "
        "its field path (expect.scores.NODE.atLeast).",
        request=s.TestCasePatchSerializer,
        responses={200: s.TestCaseSerializer, **errors(400, 404, 413)},
    )
    def patch(self, request: Request, name: str, case: str) -> Response:
        found = self._case(name, case)
        data = self.data(s.TestCasePatchSerializer, request)
        updated = services.test_case_update(
            actor=request.user,
            case=found,
            pod=_manifest_text(data["pod"]) if "pod" in data else found.pod,
            cluster=data.get("cluster", found.cluster),
            expect=data.get("expect", found.expect),
        )
        return Response(test_case_dict(updated))

    @extend_schema(operation_id="tests_destroy", responses={204: None, **errors(404)})
    def delete(self, request: Request, name: str, case: str) -> Response:
        services.test_case_delete(actor=request.user, case=self._case(name, case))
        return Response(status=status.HTTP_204_NO_CONTENT)


class _ActionOnTests(TestCaseDetail):
    """A route tests/<action> (POST) that would hide the test case named <action> from
    TestCaseDetail: its GET, PUT, PATCH and DELETE still reach that case."""

    action = ""

    @extend_schema(exclude=True)
    def get(self, request: Request, name: str) -> Response:
        return super().get(request, name, self.action)

    @extend_schema(exclude=True)
    def put(self, request: Request, name: str) -> Response:
        return super().put(request, name, self.action)

    @extend_schema(exclude=True)
    def patch(self, request: Request, name: str) -> Response:
        return super().patch(request, name, self.action)

    @extend_schema(exclude=True)
    def delete(self, request: Request, name: str) -> Response:
        return super().delete(request, name, self.action)


class TestCaseRun(_ActionOnTests):
    """POST runs every case against the draft; a failing stored case comes with the
    expectation "accept new results" would write (`proposed`) and what that changes."""

    action = "run"
    required_roles = {**TestCaseDetail.required_roles, "POST": "viewer"}

    @extend_schema(
        operation_id="tests_run",
        request=None,
        responses={200: s.TestResultSerializer(many=True), **errors(400, 404, 503)},
    )
    def post(self, request: Request, name: str) -> Response:
        policy = _policy(name)
        with request_guard():  # a slow policy is stopped (503), as a preview is
            compiled = policy_compile(policy.draft)
            results = test_cases_run(compiled=compiled, stored=policy.test_cases.all(), review=True)
        return Response(results)


class TestCasesAccept(_ActionOnTests):
    """ "Accept new results": re-records failing cases from the reviewed draft."""

    action = "accept"
    required_roles = {**TestCaseDetail.required_roles, "POST": "editor"}

    @extend_schema(
        operation_id="tests_accept",
        description="Re-records the expectation of each failing stored test case (those in "
        "`cases`, or every one) from the draft's results, editing only what fails: what "
        "tests/run showed as `proposed`. Send the ETag of the draft whose results you reviewed "
        "in If-Match: a draft that changed since gets 412 and nothing is written.",
        parameters=[OpenApiParameter("If-Match", str, OpenApiParameter.HEADER, required=True)],
        request=s.TestCasesAcceptSerializer,
        responses={
            200: s.AcceptedTestCaseSerializer(many=True),
            **errors(400, 404, 412, 413, 428, 503),
        },
    )
    def post(self, request: Request, name: str) -> Response:
        policy = _policy(name)
        data = self.data(s.TestCasesAcceptSerializer, request)
        revision = services.policy_revision_from_etag(
            policy=policy, if_match=request.headers.get("If-Match"), action="accepting new results"
        )
        with request_guard():  # the cases run under the draft's row lock: never for long
            accepted = services.test_cases_accept(
                actor=request.user, policy=policy, revision=revision, names=data.get("cases")
            )
        return Response(accepted)
