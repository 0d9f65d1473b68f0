"""REST API views: parse input, call one service or selector, render. One class per operation
(a policy's test cases: testcases.py)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers as drf
from rest_framework import status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from policies import selectors, services
from policies.cluster.loaded import pod_from_cluster
from policies.cluster.manifest import pod_view_from_source
from policies.cluster.sources import cluster_default, cluster_load
from policies.errors import NotFound
from policies.evaluation import (
    policy_validate,
    preview_dict,
    preview_run,
    profile_active,
    queue_preview_run,
    request_guard,
)
from policies.models import ApiToken, Decision, Policy, PolicyVersion
from policies.roles import user_role
from policies.rollout.canary import canary_from_request

from . import serializers as s

_ERRORS = {
    code: OpenApiResponse(s.ErrorSerializer, description=text)
    for code, text in {
        400: "Invalid input; `errors` lists each problem with its field path (and CEL line/column).",
        401: "Not authenticated.",
        403: "The user's role does not allow this.",
        404: "Not found.",
        409: "Conflicts with the current state.",
        412: "Stale If-Match: the draft changed since it was read.",
        413: "Request body too large.",
        422: "Test cases failed; `results` lists them.",
        428: "If-Match is required.",
        503: "The cluster snapshot is not available.",
    }.items()
}


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    return {code: _ERRORS[code] for code in (401, 403, *codes)}


def paginated(serializer_class) -> drf.Serializer:
    """The schema of a LimitOffsetPagination page of `serializer_class` items."""
    return inline_serializer(
        name="Paginated" + serializer_class.__name__.removesuffix("Serializer") + "List",
        fields={
            "count": drf.IntegerField(),
            "next": drf.CharField(allow_null=True),
            "previous": drf.CharField(allow_null=True),
            "results": serializer_class(many=True),
        },
    )


class Pagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 500


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def policy_dict(
    policy: Policy, *, active: int | None = None, latest: int | None = None
) -> dict[str, Any]:
    return {
        "name": policy.name,
        "description": policy.description,
        "owner": policy.owner.username if policy.owner else None,
        "document": policy.draft,
        "draft": policy.draft,  # deprecated: the old name of `document` (PolicySerializer)
        "etag": policy.etag,
        "schedulerNames": selectors.policy_scheduler_names(document=policy.draft),
        "activeVersion": active,
        "latestVersion": latest,
        "createdAt": _iso(policy.created_at),
        "updatedAt": _iso(policy.updated_at),
    }


def version_dict(
    version: PolicyVersion, *, active_number: int | None, document: bool = False
) -> dict[str, Any]:
    data = {
        "number": version.number,
        "author": version.author.username if version.author else None,
        "message": version.message,
        "contentHash": version.content_hash,
        "schedulerNames": version.scheduler_names,
        "createdAt": _iso(version.created_at),
        "active": version.number == active_number,
    }
    if document:
        data["document"] = version.document
    return data


def _found(queryset, what: str, **lookup: Any) -> Any:
    """The one row `lookup` names, or a 404 in the API's error shape that says what is missing
    (Django's own would read "No Policy matches the given query.")."""
    found = queryset.filter(**lookup).first()
    if found is None:
        raise NotFound(f"no {what}")
    return found


def _policy(name: str) -> Policy:
    return _found(Policy.objects.select_related("owner"), f"policy named {name!r}", name=name)


def _detail(policy: Policy) -> dict[str, Any]:
    active = selectors.policy_get_active(policy=policy)
    latest = policy.versions.order_by("-number").values_list("number", flat=True).first()
    return policy_dict(policy, active=active.number if active else None, latest=latest)


class ApiView(APIView):
    """Base: every API view checks roles (RolePermission is the default permission class)."""

    required_roles: dict[str, str] = {"GET": "viewer"}

    def data(self, serializer_class, request: Request) -> dict[str, Any]:
        serializer = serializer_class(data=request.data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data


# --- policies ---------------------------------------------------------------------------------


class PolicyListCreate(ApiView):
    required_roles = {"GET": "viewer", "POST": "editor"}

    @extend_schema(
        operation_id="policies_list",
        parameters=[
            OpenApiParameter("search", str, description="Substring of name or description."),
            OpenApiParameter(
                "active", bool, description="Only active (true) or inactive (false) policies."
            ),
            OpenApiParameter(
                "schedulerName", str, description="Only policies whose active version targets it."
            ),
            OpenApiParameter("limit", int),
            OpenApiParameter("offset", int),
        ],
        responses={200: paginated(s.PolicySerializer), **errors(400)},
    )
    def get(self, request: Request) -> Response:
        active_param = request.query_params.get("active")
        active = {"true": True, "false": False, None: None}.get(active_param, "bad")
        if active == "bad":
            return Response(
                {
                    "error": "invalid",
                    "detail": "active must be true or false",
                    "errors": [{"path": "active", "message": "true or false"}],
                },
                status=400,
            )
        queryset = selectors.policy_list(
            search=request.query_params.get("search", ""),
            active=active,
            scheduler_name=request.query_params.get("schedulerName", ""),
        )
        paginator = Pagination()
        page = paginator.paginate_queryset(queryset, request, view=self)
        return paginator.get_paginated_response(
            [policy_dict(p, active=p.active_number, latest=p.latest_number) for p in page]
        )

    @extend_schema(
        operation_id="policies_create",
        request=s.PolicyWriteSerializer,
        responses={201: s.PolicySerializer, **errors(400, 409, 413)},
    )
    def post(self, request: Request) -> Response:
        data = self.data(s.PolicyWriteSerializer, request)
        policy = services.policy_create(
            actor=request.user, document=data["document"], description=data.get("description")
        )
        response = Response(_detail(policy), status=status.HTTP_201_CREATED)
        response["ETag"] = policy.etag
        response["Location"] = f"/api/v1/policies/{policy.name}"
        return response


class PolicyDetail(ApiView):
    required_roles = {"GET": "viewer", "PUT": "editor", "DELETE": "admin"}

    @extend_schema(
        operation_id="policies_retrieve", responses={200: s.PolicySerializer, **errors(404)}
    )
    def get(self, request: Request, name: str) -> Response:
        policy = _policy(name)
        response = Response(_detail(policy))
        response["ETag"] = policy.etag
        return response

    @extend_schema(
        operation_id="policies_update_draft",
        description="Saves the draft. Send the ETag from GET in If-Match; a stale one gets 412 and changes nothing.",
        parameters=[OpenApiParameter("If-Match", str, OpenApiParameter.HEADER, required=True)],
        request=s.PolicyWriteSerializer,
        responses={200: s.PolicySerializer, **errors(400, 404, 412, 413, 428)},
    )
    def put(self, request: Request, name: str) -> Response:
        policy = _policy(name)
        data = self.data(s.PolicyWriteSerializer, request)
        policy = services.policy_update_draft(
            actor=request.user,
            policy=policy,
            document=data["document"],
            if_match=request.headers.get("If-Match"),
        )
        response = Response(_detail(policy))
        response["ETag"] = policy.etag
        return response

    @extend_schema(operation_id="policies_destroy", responses={204: None, **errors(404, 409)})
    def delete(self, request: Request, name: str) -> Response:
        services.policy_delete(actor=request.user, policy=_policy(name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class PolicyPublish(ApiView):
    required_roles = {"POST": "publisher"}

    @extend_schema(
        operation_id="policies_publish",
        description="Validates the draft, runs the policy's test cases on the current snapshot and, if all pass, stores and activates a new version (with `shadow`: as the shadow of the active version; with `canary`: for a share of the pods, issue 25). Send the ETag of the draft you reviewed in If-Match: a draft that changed since gets 412 and nothing is published. Returns once every live extender process serves the new version (at most SCHEDWEB_PUBLISH_CONFIRM_SECONDS); `served` says which have not confirmed.",
        parameters=[OpenApiParameter("If-Match", str, OpenApiParameter.HEADER, required=True)],
        request=s.PublishSerializer,
        responses={
            201: s.PublishResultSerializer,
            **errors(400, 404, 409, 412, 413, 422, 428, 503),
        },
    )
    def post(self, request: Request, name: str) -> Response:
        policy = _policy(name)
        data = self.data(s.PublishSerializer, request)
        revision = services.policy_revision_from_etag(
            policy=policy, if_match=request.headers.get("If-Match")
        )
        result = services.policy_publish(
            actor=request.user,
            policy=policy,
            message=data["message"],
            revision=revision,
            shadow=data["shadow"],
            canary=canary_from_request(data.get("canary")),
        )
        role = "shadow" if data["shadow"] else "canary" if "canary" in data else "active"
        active = selectors.policy_get_active(policy=policy) if role != "active" else result.version
        return Response(
            {
                "version": version_dict(result.version, active_number=active.number),
                "role": role,
                "tests": result.test_results,
                "served": result.served.to_dict(),
            },
            status=status.HTTP_201_CREATED,
        )


class PolicyRollback(ApiView):
    required_roles = {"POST": "publisher"}

    @extend_schema(
        operation_id="policies_rollback",
        description="Activates an earlier version again. Returns once every live extender process serves it (at most SCHEDWEB_PUBLISH_CONFIRM_SECONDS); `served` says which have not confirmed.",
        request=s.RollbackSerializer,
        responses={200: s.RollbackResultSerializer, **errors(400, 404, 409, 413)},
    )
    def post(self, request: Request, name: str) -> Response:
        policy = _policy(name)
        data = self.data(s.RollbackSerializer, request)
        result = services.policy_rollback(
            actor=request.user,
            policy=policy,
            number=data["version"],
            message=data.get("message", ""),
        )
        version = result.activation.version
        return Response(
            {
                **version_dict(version, active_number=version.number),
                "served": result.served.to_dict(),
            }
        )


class PolicyDeactivate(ApiView):
    required_roles = {"POST": "publisher"}

    @extend_schema(
        operation_id="policies_deactivate",
        description="Takes the policy out of service. Returns once every live extender process serves without it (at most SCHEDWEB_PUBLISH_CONFIRM_SECONDS); `served` says which have not confirmed.",
        request=None,
        responses={200: s.DeactivateResultSerializer, **errors(404, 409)},
    )
    def post(self, request: Request, name: str) -> Response:
        policy = _policy(name)
        served = services.policy_deactivate(actor=request.user, policy=policy)
        return Response({**_detail(policy), "served": served.to_dict()})


# --- versions ---------------------------------------------------------------------------------


class VersionList(ApiView):
    @extend_schema(
        operation_id="versions_list",
        parameters=[OpenApiParameter("limit", int), OpenApiParameter("offset", int)],
        responses={200: paginated(s.VersionSummarySerializer), **errors(404)},
    )
    def get(self, request: Request, name: str) -> Response:
        policy = _policy(name)
        active = selectors.policy_get_active(policy=policy)
        paginator = Pagination()
        page = paginator.paginate_queryset(
            policy.versions.select_related("author").order_by("-number"), request, view=self
        )
        return paginator.get_paginated_response(
            [version_dict(v, active_number=active.number if active else None) for v in page]
        )


class VersionDetail(ApiView):
    @extend_schema(
        operation_id="versions_retrieve", responses={200: s.VersionSerializer, **errors(404)}
    )
    def get(self, request: Request, name: str, number: int) -> Response:
        policy = _policy(name)
        version = _found(
            PolicyVersion.objects.select_related("author"),
            f"version {number} of policy {name!r}",
            policy=policy,
            number=number,
        )
        active = selectors.policy_get_active(policy=policy)
        return Response(
            version_dict(version, active_number=active.number if active else None, document=True)
        )


class VersionDiff(ApiView):
    @extend_schema(operation_id="versions_diff", responses={200: s.DiffSerializer, **errors(404)})
    def get(self, request: Request, name: str, a: int, b: int) -> Response:
        return Response(selectors.version_diff(policy=_policy(name), a=a, b=b))


# --- validate and preview ---------------------------------------------------------------------


class Validate(ApiView):
    required_roles = {"POST": "viewer"}

    @extend_schema(
        operation_id="validate",
        description="Checks a document without storing anything: every error at once, with field paths and CEL line/column.",
        request=s.ValidateSerializer,
        responses={200: s.ValidationResultSerializer, **errors(400, 413, 503)},
    )
    def post(self, request: Request) -> Response:
        data = self.data(s.ValidateSerializer, request)
        with request_guard():
            found = policy_validate(data["document"])
        return Response({"valid": not found, "errors": [e.to_dict() for e in found]})


class Preview(ApiView):
    required_roles = {"POST": "viewer"}

    @extend_schema(
        operation_id="preview",
        description=(
            "Where kube-scheduler puts one pod with the policy served by its extender (`answer`: its pick, the tie group, or why it is unschedulable), its cycle (`kubeScheduler`: per node the filters' verdict, every plugin's score, the policy's score and rank, the final total) and the policy alone over every node (`result`, policy-level): the same numbers as `evaluate`. "
            "Give a document (or a stored policy and version), a pod (or a reference to a live pod) and a cluster source; with `compare`, what would change in the cluster against the active version (the pick, the feasible set, the reasons)."
        ),
        request=s.PreviewSerializer,
        responses={200: s.PreviewResultSerializer, **errors(400, 404, 413, 503)},
    )
    def post(self, request: Request) -> Response:
        data = self.data(s.PreviewSerializer, request)
        cluster = cluster_load(data["cluster"]) if "cluster" in data else cluster_default()
        document, label, policy = _document(data)
        if document is None:
            return label  # the 404 answer
        if "pod" in data:
            pod = pod_view_from_source(data["pod"])
        else:
            pod = pod_from_cluster(cluster=cluster, **data["podRef"])
        active = None
        if data.get("compare") and policy is not None:
            active = selectors.policy_get_active(policy=policy)
        with request_guard():  # 503 too_slow past SCHEDWEB_PREVIEW_SECONDS
            preview = preview_run(
                document=document,
                pod=pod,
                cluster=cluster,
                compare_document=active.document if active is not None else None,
                profile=profile_active(scheduler_name=pod["schedulerName"]),
            )
        body: dict[str, Any] = {
            "policy": preview.compiled.name,
            "version": label,
            "pod": f"{pod['namespace']}/{pod['name']}",
            # what API defaulting and admission added before judging the pod (as stored)
            "admissionDefaults": list(pod.get("admitted") or ()),
            "cluster": {
                "source": cluster.source,
                "label": cluster.describe(),
                "version": cluster.version,
                "stale": cluster.stale,
            },
            **preview_dict(preview),  # answer, result (policy-level), kubeScheduler
            "compare": None,
        }
        if preview.compare_error is not None:  # the active version no longer compiles here
            raise preview.compare_error
        if preview.comparison is not None:
            body["compare"] = {"againstVersion": active.number, **preview.comparison}
        return Response(body)


def _document(data: dict) -> tuple[str | None, Any, Policy | None]:
    """The document a preview names: (text, label, policy), or (None, a 404 Response, None)
    for a policy without an active version."""
    if "document" in data:
        return data["document"], "document", None
    policy = _policy(data["policy"])
    version = data.get("version", "draft")
    if version == "draft":
        return policy.draft, "draft", policy
    if version == "active":
        active = selectors.policy_get_active(policy=policy)
        if active is None:
            detail = f"policy {policy.name} has no active version"
            return None, Response({"error": "not_found", "detail": detail}, status=404), None
        return active.document, f"v{active.number}", policy
    found = _found(
        PolicyVersion.objects,
        f"version {version} of policy {policy.name!r}",
        policy=policy,
        number=int(version),
    )
    return found.document, f"v{found.number}", policy


class QueuePreview(ApiView):
    required_roles = {"POST": "viewer"}

    @extend_schema(
        operation_id="preview_queue",
        description=(
            "The pending pods of the policy's schedulerNames in the order kube-scheduler's queue "
            "would take them under the document's `queue:` (each pod's key, the priority "
            "schedweb's admission webhook gives it), highest first."
        ),
        request=s.QueuePreviewSerializer,
        responses={200: s.QueuePreviewResultSerializer, **errors(400, 404, 413, 503)},
    )
    def post(self, request: Request) -> Response:
        data = self.data(s.QueuePreviewSerializer, request)
        cluster = cluster_load(data["cluster"]) if "cluster" in data else cluster_default()
        document, label, _ = _document(data)
        if document is None:
            return label
        with request_guard():
            preview = queue_preview_run(document=document, cluster=cluster)
        queue = preview.compiled.spec.queue
        return Response(
            {
                "policy": preview.compiled.name,
                "version": label,
                "queue": None
                if queue is None
                else {"expression": queue.expression, "min": queue.min, "max": queue.max},
                "cluster": {
                    "source": cluster.source,
                    "label": cluster.describe(),
                    "version": cluster.version,
                    "stale": cluster.stale,
                },
                "total": preview.total,
                "pods": [
                    {
                        "pod": f"{pod['namespace']}/{pod['name']}",
                        "schedulerName": pod["schedulerName"],
                        "priority": int(pod.get("priority") or 0),
                        **key.to_dict(),
                    }
                    for pod, key in preview.rows
                ],
            }
        )


# --- audit, tokens, me ----------------------------------------------------------------------------


class AuditList(ApiView):
    @extend_schema(
        operation_id="audit_list",
        parameters=[
            OpenApiParameter("policy", str),
            OpenApiParameter("action", str),
            OpenApiParameter("actor", str),
            OpenApiParameter("limit", int),
            OpenApiParameter("offset", int),
        ],
        responses={200: paginated(s.AuditEventSerializer), **errors(400)},
    )
    def get(self, request: Request) -> Response:
        queryset = selectors.audit_list(
            policy_name=request.query_params.get("policy", ""),
            action=request.query_params.get("action", ""),
            actor=request.query_params.get("actor", ""),
        )
        paginator = Pagination()
        page = paginator.paginate_queryset(queryset, request, view=self)
        return paginator.get_paginated_response(
            [
                {
                    "id": e.pk,
                    "actor": e.actor_name,
                    "action": e.action,
                    "policy": e.policy_name,
                    "version": e.version,
                    "detail": e.detail,
                    "createdAt": _iso(e.created_at),
                }
                for e in page
            ]
        )


def token_dict(token: ApiToken) -> dict[str, Any]:
    return {
        "id": token.pk,
        "name": token.name,
        "prefix": token.prefix,
        "user": token.user.username,
        "createdAt": _iso(token.created_at),
        "lastUsedAt": _iso(token.last_used_at),
        "revokedAt": _iso(token.revoked_at),
    }


class TokenListCreate(ApiView):
    required_roles = {"GET": "viewer", "POST": "viewer"}

    @extend_schema(
        operation_id="tokens_list",
        description="Your tokens (admins: everyone's with ?all=true).",
        parameters=[OpenApiParameter("all", bool)],
        responses={200: s.TokenSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        queryset = ApiToken.objects.select_related("user")
        if not (request.query_params.get("all") == "true" and user_role(request.user) == "admin"):
            queryset = queryset.filter(user=request.user)
        return Response([token_dict(t) for t in queryset])

    @extend_schema(
        operation_id="tokens_create",
        request=s.TokenCreateSerializer,
        responses={201: s.NewTokenSerializer, **errors(400, 413)},
    )
    def post(self, request: Request) -> Response:
        data = self.data(s.TokenCreateSerializer, request)
        token, raw = services.api_token_create(
            actor=request.user, user=request.user, name=data["name"]
        )
        return Response({**token_dict(token), "token": raw}, status=status.HTTP_201_CREATED)


class TokenRevoke(ApiView):
    required_roles = {"DELETE": "viewer"}

    @extend_schema(
        operation_id="tokens_revoke", responses={200: s.TokenSerializer, **errors(404, 409)}
    )
    def delete(self, request: Request, token_id: int) -> Response:
        queryset = ApiToken.objects.select_related("user")
        if user_role(request.user) != "admin":
            queryset = queryset.filter(user=request.user)
        token = _found(queryset, f"token {token_id}", pk=token_id)
        return Response(token_dict(services.api_token_revoke(actor=request.user, token=token)))


class Me(ApiView):
    @extend_schema(operation_id="me", responses={200: s.MeSerializer})
    def get(self, request: Request) -> Response:
        return Response({"username": request.user.username, "role": user_role(request.user)})


# --- decisions ------------------------------------------------------------------------------------


def decision_dict(decision: Decision) -> dict[str, Any]:
    recorded = decision.nodes or {}
    return {
        "id": decision.pk,
        "createdAt": _iso(decision.created_at),
        "pod": {
            "namespace": decision.pod_namespace,
            "name": decision.pod_name,
            "uid": decision.pod_uid,
        },
        "policy": decision.policy_name,
        "version": decision.policy_version,
        "verb": decision.verb,
        "chosenNode": decision.chosen_node,
        "chosenAt": _iso(decision.chosen_at),
        "scores": recorded.get("scores", []),
        "weights": recorded.get("weights", []),
        "nodes": recorded.get("nodes", []),
        # the request waited for the snapshot to catch up: how long, for what, how it ended
        "catchUp": recorded.get("catchUp"),
    }


class DecisionList(ApiView):
    @extend_schema(
        operation_id="decisions_list",
        description="Sampled extender decisions, newest first: the pod, the policy version that answered, every node's outcome and the node the pod was bound to.",
        parameters=[
            OpenApiParameter("pod", str, description="Pod name."),
            OpenApiParameter("namespace", str),
            OpenApiParameter("policy", str),
            OpenApiParameter("node", str, description="Chosen node."),
            OpenApiParameter("limit", int),
            OpenApiParameter("offset", int),
        ],
        responses={200: paginated(s.DecisionSerializer), **errors(400)},
    )
    def get(self, request: Request) -> Response:
        queryset = selectors.decision_list(
            pod=request.query_params.get("pod", ""),
            namespace=request.query_params.get("namespace", ""),
            policy=request.query_params.get("policy", ""),
            node=request.query_params.get("node", ""),
        )
        paginator = Pagination()
        page = paginator.paginate_queryset(queryset, request, view=self)
        return paginator.get_paginated_response([decision_dict(d) for d in page])


class DecisionDetail(ApiView):
    @extend_schema(
        operation_id="decisions_retrieve", responses={200: s.DecisionSerializer, **errors(404)}
    )
    def get(self, request: Request, decision_id: int) -> Response:
        return Response(
            decision_dict(_found(Decision.objects, f"decision {decision_id}", pk=decision_id))
        )
