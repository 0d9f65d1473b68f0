"""REST endpoints of a policy's canary (issue 25, item 3): its status, promote, abort.

Publishing a canary is `POST /policies/<name>/publish` with `"canary": {"percent": 20}` (or
`{"selector": "team=a"}`, with an optional `guard` and `promoteAfterSeconds`).
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from policies.rollout.canary import (
    canary_last_rollback,
    canary_status,
    policy_canary_abort,
    policy_canary_promote,
)

from . import serializers as s
from .shadow import promoted_response
from .views import ApiView, _detail, _policy, errors


class CanaryStatus(ApiView):
    required_roles = {"GET": "viewer"}

    @extend_schema(
        operation_id="policies_canary",
        description="The canary in force (null without one): its version and the stable one, "
        "its share, its guard and quiet period, and how each arm is doing since its publish "
        "(filter answers judged, rejected on every node, with evaluation errors, and their "
        "rates, over every extender process); and the guard's last rollback of this policy.",
        responses={200: s.CanaryStatusResponseSerializer, **errors(404)},
    )
    def get(self, request: Request, name: str) -> Response:
        policy = _policy(name)
        return Response(
            {
                "policy": policy.name,
                "canary": canary_status(policy=policy),
                "lastGuardRollback": canary_last_rollback(policy=policy),
            }
        )


class CanaryPromote(ApiView):
    required_roles = {"POST": "publisher"}

    @extend_schema(
        operation_id="policies_canary_promote",
        description="The canary decides every pod: it becomes the active version. Returns once "
        "every live extender process serves it (at most SCHEDWEB_PUBLISH_CONFIRM_SECONDS); "
        "`served` says which have not confirmed.",
        request=s.CanaryPromoteSerializer,
        responses={200: s.RollbackResultSerializer, **errors(400, 404, 409, 413)},
    )
    def post(self, request: Request, name: str) -> Response:
        policy = _policy(name)
        data = self.data(s.CanaryPromoteSerializer, request)
        result = policy_canary_promote(
            actor=request.user,
            policy=policy,
            message=data.get("message", ""),
            expect_version=data.get("version"),
        )
        return promoted_response(result)


class CanaryAbort(ApiView):
    required_roles = {"POST": "publisher"}

    @extend_schema(
        operation_id="policies_canary_abort",
        description="Back to the stable version for every pod. Returns once every live "
        "extender process stopped judging with the canary (at most "
        "SCHEDWEB_PUBLISH_CONFIRM_SECONDS).",
        request=s.ShadowDiscardSerializer,
        responses={200: s.DeactivateResultSerializer, **errors(400, 404, 409, 413)},
    )
    def post(self, request: Request, name: str) -> Response:
        policy = _policy(name)
        data = self.data(s.ShadowDiscardSerializer, request)
        served = policy_canary_abort(
            actor=request.user, policy=policy, message=data.get("message", "")
        )
        return Response({**_detail(policy), "served": served.to_dict()})
