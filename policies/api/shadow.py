"""REST endpoints of a policy's shadow version (issue 25): its report, promote, discard.

Publishing a shadow is `POST /policies/<name>/publish` with `"shadow": true`.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from policies.engine.document import FieldError
from policies.errors import InputError
from policies.numbers import number_or_none
from policies.rollout import selectors as rollout
from policies.rollout.services import policy_shadow_discard, policy_shadow_promote

from . import serializers as s
from .views import ApiView, Pagination, _detail, _policy, errors, version_dict


class ReportPagination(Pagination):
    """A record carries two node breakdowns (up to 500 nodes each): fewer per page."""

    default_limit = 20
    max_limit = 100


class ShadowReport(ApiView):
    required_roles = {"GET": "viewer"}

    @extend_schema(
        operation_id="policies_shadow_report",
        description="The shadow report: over a window (the last hour, day or week, or custom "
        "`since`..`until`, at most 31 days), the pods the shadow version judged after the "
        "active version answered, counted by outcome, exactly (same, nodes: other nodes let "
        "through or rejected, moved: another preferred node, rejected: no feasible node left, "
        "error, skipped: not judged, the process was busy), and the records of the pods judged "
        "differently (`outcome`: one of them; default every one), newest first, each with the "
        "pod and the difference. Records are a sample: each extender process lists at most "
        "SCHEDWEB_SHADOW_RECORDS_PER_SECOND a second (`summary.listed` of `summary.differed`), "
        "and keeps both versions' node breakdowns for at most "
        "SCHEDWEB_SHADOW_DETAILS_PER_SECOND of those; pods judged alike or skipped are counted "
        "only.",
        parameters=[
            OpenApiParameter("window", str, enum=["hour", "day", "week", "custom"]),
            OpenApiParameter("since", str, description="ISO 8601 with an offset (custom)."),
            OpenApiParameter("until", str, description="ISO 8601 with an offset (custom)."),
            OpenApiParameter(
                "version",
                int,
                description="A shadow version (default: the one in force, else every one).",
            ),
            OpenApiParameter("outcome", str, enum=list(rollout.DIFFERING)),
            OpenApiParameter("limit", int),
            OpenApiParameter("offset", int),
        ],
        responses={200: s.ShadowReportSerializer, **errors(400, 404)},
    )
    def get(self, request: Request, name: str) -> Response:
        policy = _policy(name)
        query = request.query_params
        window = rollout.shadow_window(
            window=query.get("window", "hour"),
            since=query.get("since", ""),
            until=query.get("until", ""),
        )
        outcome = query.get("outcome", "")
        if outcome and outcome not in rollout.DIFFERING:
            counted = outcome in rollout.OUTCOMES  # same, skipped: counts only, no records
            raise InputError(
                "pods judged alike or skipped are counted, not listed"
                if counted
                else "unknown outcome",
                details=[FieldError("outcome", "one of " + ", ".join(rollout.DIFFERING)).to_dict()],
            )
        shadow = rollout.shadow_get(policy=policy)
        version = number_or_none(query["version"]) if "version" in query else None
        if "version" in query and version is None:
            raise InputError(
                "version must be a version number",
                details=[FieldError("version", "a positive whole number").to_dict()],
            )
        if version is None and shadow is not None:
            version = shadow.version.number
        records = rollout.shadow_records(policy_name=policy.name, window=window, version=version)
        records = records.filter(
            shadow_outcome__in=[outcome] if outcome else rollout.DIFFERING
        ).order_by("-created_at", "-pk")
        paginator = ReportPagination()
        page = paginator.paginate_queryset(records, request, view=self)
        response = paginator.get_paginated_response([rollout.shadow_record_dict(r) for r in page])
        response.data = {
            "policy": policy.name,
            "shadow": shadow_status(shadow),
            "version": version,
            "window": {
                "name": window.name,
                "since": window.since.isoformat(),
                "until": window.until.isoformat(),
            },
            "summary": rollout.shadow_summary(
                policy_name=policy.name, window=window, version=version
            ),
            **response.data,
        }
        return response


def shadow_status(shadow) -> dict | None:
    """The shadow in force as the report and the policy's answers say it, or None."""
    if shadow is None:
        return None
    return {
        "version": shadow.version.number,
        "message": shadow.version.message,
        "schedulerNames": shadow.version.scheduler_names,
        "since": shadow.activated_at.isoformat(),
        "by": shadow.activated_by.get_username() if shadow.activated_by else None,
    }


class ShadowPromote(ApiView):
    required_roles = {"POST": "publisher"}

    @extend_schema(
        operation_id="policies_shadow_promote",
        description="The shadow version becomes the active version, through publish's gate: the "
        "policy's test cases must pass on it (422 otherwise) and a message is required. Returns "
        "once every live extender process serves it (at most SCHEDWEB_PUBLISH_CONFIRM_SECONDS); "
        "`served` says which have not confirmed.",
        request=s.ShadowPromoteSerializer,
        responses={200: s.RollbackResultSerializer, **errors(400, 404, 409, 413, 422)},
    )
    def post(self, request: Request, name: str) -> Response:
        policy = _policy(name)
        data = self.data(s.ShadowPromoteSerializer, request)
        result = policy_shadow_promote(
            actor=request.user,
            policy=policy,
            message=data["message"],
            expect_version=data.get("version"),
        )
        return promoted_response(result)


def promoted_response(result) -> Response:
    """A promotion's answer (a shadow's or a canary's): the version, now active, and `served`."""
    version = result.activation.version
    return Response(
        {**version_dict(version, active_number=version.number), "served": result.served.to_dict()}
    )


class ShadowDiscard(ApiView):
    required_roles = {"POST": "publisher"}

    @extend_schema(
        operation_id="policies_shadow_discard",
        description="Ends the shadow (its records stay until pruned). Returns once every live "
        "extender process stopped judging it (at most SCHEDWEB_PUBLISH_CONFIRM_SECONDS).",
        request=s.ShadowDiscardSerializer,
        responses={200: s.DeactivateResultSerializer, **errors(400, 404, 409, 413)},
    )
    def post(self, request: Request, name: str) -> Response:
        policy = _policy(name)
        data = self.data(s.ShadowDiscardSerializer, request)
        served = policy_shadow_discard(
            actor=request.user, policy=policy, message=data.get("message", "")
        )
        return Response({**_detail(policy), "served": served.to_dict()})
