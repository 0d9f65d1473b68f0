"""/api/v1/backtests: a document over the pods of recent decisions and the pending pods, now.

    POST /api/v1/backtests           {document | policy [+ version], last?}: 200 with the result
                                     when it was judged in the request, 202 with a job to poll
    GET  /api/v1/backtests/<job>     the job; once done, its summary and a page of rows
                                     (?offset= ?limit= ?differ=1: only the pods that differ)

Editors and publishers start backtests (read-only toward the cluster, but it costs CPU: viewers
read pages, they do not start work); each request is charged by its size in pods
(throttle.work_charge). A job is read by the user who started it; to anyone else it does not
exist.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from policies.api.serializers import PolicySourceSerializer
from policies.api.views import ApiView, _document, errors
from policies.backtest.jobs import (
    BudgetSpent,
    JobError,
    backtest_job_read,
    backtest_start,
    charge_for,
)
from policies.backtest.run import DIFFERS, MAX_LAST, last_check
from policies.errors import NotFound
from policies.numbers import number_or_none

PAGE_DEFAULT, PAGE_MAX = 100, 500  # rows per GET


class BacktestSerializer(PolicySourceSerializer):
    """A document, or a stored policy's draft/active/version; always the current cluster."""

    cluster = None  # a backtest compares with what happened: the configured cluster only
    last = serializers.JSONField(
        required=False,
        help_text=f"How many recent decisions' pods to judge: 1 to {MAX_LAST} (default 200).",
    )

    def validate(self, attrs: dict) -> dict:
        attrs = super().validate(attrs)
        try:
            attrs["last"] = last_check(attrs.get("last"))
        except Exception as exc:  # InputError with the field's message
            details = getattr(exc, "details", None) or [{"message": str(exc)}]
            raise serializers.ValidationError({"last": [details[0]["message"]]}) from None
        return attrs


class BacktestJobSerializer(serializers.Serializer):
    job = serializers.CharField()
    status = serializers.ChoiceField(choices=["queued", "running", "done", "error"])
    done = serializers.IntegerField()
    total = serializers.IntegerField()
    error = serializers.CharField(allow_null=True)
    policy = serializers.CharField()
    version = serializers.CharField(help_text="draft, document, or vN")
    last = serializers.IntegerField()
    poll = serializers.CharField(help_text="Where to GET the job.")
    result = serializers.DictField(
        allow_null=True,
        help_text="Once done: policy, schedulerNames, cluster, summary (counts per class), "
        "empty (why there is nothing to compare), and `rows` (this page), `count` (rows in "
        "all), `offset`, `limit`.",
    )


def _job_body(job_id: str, job: dict[str, Any], offset: int, limit: int, differ: bool) -> dict:
    body = {
        "job": job_id,
        "status": job["status"],
        "done": job["done"],
        "total": job["total"],
        "error": job.get("error") or None,
        "policy": job.get("policy", ""),
        "version": job.get("label", ""),
        "last": job["last"],
        "poll": f"/api/v1/backtests/{job_id}",
        "result": None,
    }
    result = job.get("results")
    if result is not None:
        rows = result["rows"]
        if differ:
            rows = [r for r in rows if r["class"] in DIFFERS]
        body["result"] = {
            **result,
            "rows": rows[offset : offset + limit],
            "count": len(rows),
            "offset": offset,
            "limit": limit,
        }
    return body


def _unavailable(exc: JobError) -> Response:
    return Response({"error": "error", "detail": str(exc)}, status=503)


class BacktestStart(ApiView):
    required_roles = {"POST": "editor"}

    @extend_schema(
        operation_id="backtest_start",
        description=(
            "Judge a document (or a policy's draft, active or numbered version) over the pods of "
            "the last `last` decisions recorded for its schedulerNames and their pending pods, "
            "against the current cluster, with kube-scheduler's pick from the model; each pod "
            "classified against what happened (same, moved, newly-unschedulable, "
            "newly-schedulable, error, skipped; pending: would-schedule, still-unschedulable). "
            "A small backtest answers 200 with its first page; a larger one 202 with a job to "
            "poll. Charged by its size in pods (429 with Retry-After past the window's budget)."
        ),
        request=BacktestSerializer,
        responses={
            200: BacktestJobSerializer,
            202: BacktestJobSerializer,
            **errors(400, 404, 413, 503),
        },
    )
    def post(self, request: Request) -> Response:
        data = self.data(BacktestSerializer, request)
        document, label, policy = _document(data)
        if document is None:
            return label  # the 404 answer

        try:
            job_id, job = backtest_start(
                document=document,
                label=label,
                policy_name=policy.name if policy is not None else "",
                last=data["last"],
                user_id=request.user.pk,
                charge=charge_for(request.user.pk),
            )
        except BudgetSpent as exc:
            raise exceptions.Throttled(wait=exc.retry_after, detail=exc.message) from None
        except JobError as exc:
            return _unavailable(exc)
        body = _job_body(job_id, job, 0, PAGE_DEFAULT, False)
        done = job["status"] in ("done", "error")
        return Response(body, status=status.HTTP_200_OK if done else status.HTTP_202_ACCEPTED)


class BacktestDetail(ApiView):
    required_roles = {"GET": "viewer"}

    @extend_schema(
        operation_id="backtest_get",
        description="A backtest job: its progress, and once done its summary and a page of rows "
        "(differing pods first).",
        parameters=[
            OpenApiParameter("offset", int, description="First row (default 0)."),
            OpenApiParameter(
                "limit", int, description=f"Rows (default {PAGE_DEFAULT}, at most {PAGE_MAX})."
            ),
            OpenApiParameter("differ", bool, description="Only the pods that would differ."),
        ],
        responses={200: BacktestJobSerializer, **errors(400, 404, 503)},
    )
    def get(self, request: Request, job_id: str) -> Response:
        problems = []
        offset = number_or_none(request.query_params.get("offset", "0"), minimum=0)
        limit = number_or_none(request.query_params.get("limit", str(PAGE_DEFAULT)), minimum=1)
        if offset is None:
            problems.append({"path": "offset", "message": "a whole number from 0"})
        if limit is None or limit > PAGE_MAX:
            problems.append({"path": "limit", "message": f"a whole number from 1 to {PAGE_MAX}"})
        if problems:
            return Response(
                {"error": "invalid", "detail": "the request is invalid", "errors": problems},
                status=400,
            )
        try:
            job = backtest_job_read(job_id=job_id) if len(job_id) == 32 else None
        except JobError as exc:
            return _unavailable(exc)
        if job is None or job.get("user") != str(request.user.pk):
            raise NotFound(f"no backtest {job_id!r} (it expires an hour after it ran)")
        differ = request.query_params.get("differ", "") in ("1", "true")
        return Response(_job_body(job_id, job, offset, limit, differ))
