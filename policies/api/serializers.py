"""Request bodies (strict: unknown fields are errors) and response shapes (for the schema)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from policies.numbers import number_or_none

from .errors import ERROR_CODES


class StrictSerializer(serializers.Serializer):
    """A serializer that refuses fields it does not define, naming them."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["unknown field"] for name in unknown})
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    """A string, and only a string (DRF's CharField would turn 42 into "42")."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_field(
    {"oneOf": [{"type": "object", "additionalProperties": True}, {"type": "string"}]}
)
class ManifestField(serializers.Field):
    """A Kubernetes object given as a JSON object or as YAML/JSON text."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict | str):
            return data
        raise serializers.ValidationError("expected an object or YAML/JSON text")

    def to_representation(self, value: Any) -> Any:
        return value


@extend_schema_serializer(deprecate_fields=["draft"])
class PolicyWriteSerializer(StrictSerializer):
    """`document`, the name GET answers with too; `draft` is its old name, accepted until 2.0."""

    document = StrictCharField(
        required=False,
        trim_whitespace=False,
        max_length=262_144,
        help_text="The policy document, YAML or JSON text (required).",
    )
    draft = StrictCharField(
        required=False,
        trim_whitespace=False,
        max_length=262_144,
        help_text="Deprecated (until API 2.0): the old name of `document`; give one of the two.",
    )
    description = StrictCharField(required=False, allow_blank=True, max_length=2000)

    def validate(self, attrs: dict) -> dict:
        if "document" in attrs and "draft" in attrs:
            raise serializers.ValidationError({"draft": ["give document or draft, not both"]})
        if "draft" in attrs:
            attrs["document"] = attrs.pop("draft")
        elif "document" not in attrs:
            raise serializers.ValidationError({"document": ["This field is required."]})
        return attrs


class StrictBooleanField(serializers.BooleanField):
    """true or false, and only those (DRF's would take "yes", 1 and "on")."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class PublishSerializer(StrictSerializer):
    message = StrictCharField(max_length=2000, help_text="What changed and why (required).")
    shadow = StrictBooleanField(
        required=False,
        default=False,
        help_text="Publish as the shadow of the active version (issue 25): evaluated after "
        "every answer and recorded, never answering.",
    )
    canary = serializers.JSONField(
        required=False,
        help_text="Publish as a canary (issue 25): {percent: 1-99 | selector: label selector, "
        "guard?: {rejectedRate, errorRate: 0-100 points above stable, minPods: 1-100000}, "
        "promoteAfterSeconds?: 60-2592000}. The new version decides that share of the pods, "
        "the active version the rest; checked field by field (400 with `canary.<field>`).",
    )


class CanaryPromoteSerializer(StrictSerializer):
    message = StrictCharField(
        required=False, allow_blank=True, max_length=2000, help_text="Why (optional)."
    )
    version = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=2**31 - 1,
        help_text="The canary version reviewed: 409 when another canary replaced it since.",
    )


class CanaryStatusResponseSerializer(serializers.Serializer):
    policy = serializers.CharField()
    canary = serializers.DictField(allow_null=True, help_text="The canary in force, or null.")
    lastGuardRollback = serializers.DictField(allow_null=True)


class ShadowPromoteSerializer(StrictSerializer):
    message = StrictCharField(max_length=2000, help_text="Why it is promoted (required).")
    version = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=2**31 - 1,
        help_text="The shadow version reviewed: 409 when another shadow replaced it since.",
    )


class ShadowDiscardSerializer(StrictSerializer):
    message = StrictCharField(
        required=False, allow_blank=True, max_length=2000, help_text="Why (optional)."
    )


class RollbackSerializer(StrictSerializer):
    version = serializers.IntegerField(min_value=1, max_value=2**31 - 1)
    message = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=2000,
        help_text="Why (optional), like publish's message; kept in the audit log.",
    )


class ValidateSerializer(StrictSerializer):
    document = StrictCharField(trim_whitespace=False, max_length=262_144)


class PodRefSerializer(StrictSerializer):
    namespace = StrictCharField(max_length=253)
    name = StrictCharField(max_length=253)


class PolicySourceSerializer(StrictSerializer):
    """What a preview runs on: a document or a stored policy's version, and a cluster source."""

    document = StrictCharField(
        required=False,
        trim_whitespace=False,
        max_length=262_144,
        help_text="A policy document (e.g. an unsaved draft).",
    )
    policy = StrictCharField(
        required=False, max_length=63, help_text="Or a stored policy's name..."
    )
    version = StrictCharField(
        required=False,
        max_length=12,
        help_text="...and which of its documents: draft (default), active, or a version number.",
    )
    cluster = serializers.ChoiceField(
        choices=["demo", "live"],
        required=False,
        help_text="Cluster source; default: the configured one.",
    )

    def validate(self, attrs: dict) -> dict:
        if ("document" in attrs) == ("policy" in attrs):
            raise serializers.ValidationError({"document": ["give either document or policy"]})
        if "version" in attrs and "policy" not in attrs:
            raise serializers.ValidationError({"version": ["version needs policy"]})
        version = attrs.get("version", "draft")
        if version not in ("draft", "active") and number_or_none(version, minimum=1) is None:
            raise serializers.ValidationError({"version": ["draft, active or a version number"]})
        return attrs


class PreviewSerializer(PolicySourceSerializer):
    pod = ManifestField(required=False, help_text="The pod, as an object or YAML/JSON text.")
    podRef = PodRefSerializer(
        required=False, help_text="Or a pod of the live cluster by namespace and name."
    )
    compare = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Also evaluate the active version and report what changes.",
    )

    def validate(self, attrs: dict) -> dict:
        attrs = super().validate(attrs)
        if ("pod" in attrs) == ("podRef" in attrs):
            raise serializers.ValidationError({"pod": ["give either pod or podRef"]})
        if attrs.get("compare") and "policy" not in attrs:
            raise serializers.ValidationError(
                {"compare": ["compare needs policy (to find its active version)"]}
            )
        return attrs


class QueuePreviewSerializer(PolicySourceSerializer):
    """The queue preview takes no pod: it orders the cluster's pending pods."""


class QueuePodSerializer(serializers.Serializer):
    pod = serializers.CharField(help_text="namespace/name")
    schedulerName = serializers.CharField()
    priority = serializers.IntegerField(help_text="The pod's priority now.")
    key = serializers.IntegerField(
        allow_null=True, help_text="Its queue key, the priority it would get; null: unchanged."
    )
    raw = serializers.IntegerField(allow_null=True, help_text="The key before clamping.")
    clamped = serializers.BooleanField()
    reason = serializers.CharField(allow_blank=True)
    error = serializers.BooleanField()


class QueuePreviewResultSerializer(serializers.Serializer):
    policy = serializers.CharField()
    version = serializers.CharField()
    queue = serializers.DictField(allow_null=True, help_text="The document's queue: section.")
    cluster = serializers.DictField()
    total = serializers.IntegerField(help_text="Pending pods of the policy's schedulerNames.")
    pods = QueuePodSerializer(many=True, help_text="In queue order, the first 500.")


class TestCaseWriteSerializer(StrictSerializer):
    name = serializers.RegexField(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", max_length=63)
    pod = ManifestField(help_text="The pod, as an object or YAML/JSON text.")
    cluster = StrictCharField(
        required=False,
        allow_blank=True,
        default="",
        trim_whitespace=False,
        max_length=4_000_000,
        help_text="Empty: the current snapshot; 'demo'; or kubectl JSON/YAML of nodes and pods.",
    )
    expect = serializers.DictField(
        help_text="landsIn, unschedulable, rejectedBy, applies; policy-level: winner, winnerIn, "
        "verdicts, extenderScores, scores (docs/policies.md, section 6)."
    )


class TestCaseUpdateSerializer(TestCaseWriteSerializer):
    name = StrictCharField(required=False, read_only=True)


class TestCasePatchSerializer(StrictSerializer):
    """Any of a test case's pod, cluster and expectation; the rest is kept."""

    pod = ManifestField(required=False, help_text="The pod, as an object or YAML/JSON text.")
    cluster = StrictCharField(
        required=False, allow_blank=True, trim_whitespace=False, max_length=4_000_000
    )
    expect = serializers.DictField(
        required=False,
        help_text="landsIn, unschedulable, rejectedBy, applies; policy-level: winner, winnerIn, "
        "verdicts, extenderScores, scores (docs/policies.md, section 6).",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError(
                {"expect": ["give at least one of pod, cluster, expect"]}
            )
        return attrs


class TestCasesAcceptSerializer(StrictSerializer):
    cases = serializers.ListField(
        child=StrictCharField(max_length=63),
        required=False,
        allow_empty=False,
        max_length=1000,
        help_text="The test cases to accept; left out: every failing one.",
    )


class TokenCreateSerializer(StrictSerializer):
    name = StrictCharField(max_length=100)


# --- response shapes (documentation; views build plain dicts) ----------------------------------


class FieldErrorSerializer(serializers.Serializer):
    """One problem of the input: where (a field path; for CEL, the line and column inside the
    expression and in the document) and what."""

    path = serializers.CharField(allow_blank=True)
    message = serializers.CharField()
    kind = serializers.CharField(required=False)
    rule = serializers.CharField(required=False, allow_null=True)
    line = serializers.IntegerField(required=False, allow_null=True)
    column = serializers.IntegerField(required=False, allow_null=True)
    docLine = serializers.IntegerField(required=False, allow_null=True)
    docColumn = serializers.IntegerField(required=False, allow_null=True)
    celMessage = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="A type error in CEL's own (cel-go's) words, when `message` puts it plainly.",
    )


class ExpectationChangeSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="landsIn, rejectedBy.cp-1, scores.a-1.atLeast, ...")
    old = serializers.JSONField(allow_null=True)
    new = serializers.JSONField(allow_null=True)


class TestResultSerializer(serializers.Serializer):
    name = serializers.CharField()
    passed = serializers.BooleanField()
    failures = serializers.ListField(child=serializers.CharField())
    proposed = serializers.DictField(
        required=False,
        help_text="Run only, a failing stored case: the expectation 'accept new results' writes.",
    )
    changes = ExpectationChangeSerializer(many=True, required=False)


class AcceptedTestCaseSerializer(serializers.Serializer):
    name = serializers.CharField()
    expect = serializers.DictField()
    changes = ExpectationChangeSerializer(many=True)


class ConflictSerializer(serializers.Serializer):
    """What a schedulerName conflict is with: the active policy that holds the names."""

    policy = serializers.CharField()
    schedulerNames = serializers.ListField(child=serializers.CharField())


class ErrorSerializer(serializers.Serializer):
    error = serializers.ChoiceField(choices=list(ERROR_CODES.items()))
    detail = serializers.CharField()
    errors = FieldErrorSerializer(many=True, required=False)
    results = TestResultSerializer(many=True, required=False)
    conflict = ConflictSerializer(required=False)


class VersionSummarySerializer(serializers.Serializer):
    number = serializers.IntegerField()
    author = serializers.CharField(allow_null=True)
    message = serializers.CharField()
    contentHash = serializers.CharField()
    schedulerNames = serializers.ListField(child=serializers.CharField())
    createdAt = serializers.DateTimeField()
    active = serializers.BooleanField()


class VersionSerializer(VersionSummarySerializer):
    document = serializers.CharField()


@extend_schema_serializer(deprecate_fields=["draft"])
class PolicySerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    owner = serializers.CharField(allow_null=True)
    document = serializers.CharField(
        help_text="The draft's text: PUT it back under the same name to save an edit."
    )
    draft = serializers.CharField(
        help_text="Deprecated (until API 2.0): the same text as `document`, under its old name."
    )
    etag = serializers.CharField()
    schedulerNames = serializers.ListField(child=serializers.CharField())
    activeVersion = serializers.IntegerField(allow_null=True)
    latestVersion = serializers.IntegerField(allow_null=True)
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()


class ValidationResultSerializer(serializers.Serializer):
    valid = serializers.BooleanField()
    errors = FieldErrorSerializer(many=True)


@extend_schema_field(OpenApiTypes.OBJECT)
class AnyObjectField(serializers.Field):
    pass


class KubeSchedulerVerdictSerializer(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=["pass", "reject"])
    plugin = serializers.CharField(allow_null=True)
    reasons = serializers.ListField(child=serializers.CharField())


class PluginScoreSerializer(serializers.Serializer):
    plugin = serializers.CharField()
    score = serializers.IntegerField(
        allow_null=True, help_text="normalized 0..100 (null: PreScore skipped the plugin)"
    )
    weight = serializers.IntegerField()
    weighted = serializers.IntegerField()
    skipped = serializers.BooleanField(
        required=False, help_text="true: PreScore skipped the plugin, it scores no node"
    )


class CycleNodeSerializer(serializers.Serializer):
    node = serializers.CharField()
    kubeScheduler = KubeSchedulerVerdictSerializer()
    policyVerdict = serializers.ChoiceField(choices=["pass", "reject"], allow_null=True)
    policyRule = serializers.CharField(allow_null=True)
    policyTotal = serializers.FloatField(
        allow_null=True,
        help_text="the policy's score 0..100 as the extender scored the node (null: not scored)",
    )
    policyRank = serializers.IntegerField(
        allow_null=True,
        help_text="the policy's own rank among the nodes the extender scored; not the answer",
    )
    pluginScores = PluginScoreSerializer(many=True)
    extenderScore = serializers.IntegerField(help_text="the policy's 0..10")
    extenderContribution = serializers.IntegerField(
        help_text="extenderScore x extender weight x 10"
    )
    finalTotal = serializers.IntegerField(allow_null=True)


class KubeSchedulerCycleSerializer(serializers.Serializer):
    """kube-scheduler's cycle around the policy (policies/schedmodel)."""

    extenderWeight = serializers.IntegerField()
    strategy = serializers.CharField()
    pick = serializers.ListField(
        child=serializers.CharField(), help_text="the tie group kube-scheduler picks from"
    )
    tie = serializers.BooleanField()
    rejections = serializers.DictField(child=serializers.IntegerField())
    failedScheduling = serializers.CharField(
        allow_null=True,
        help_text="the FailedScheduling event's whole message (null: the pod is placed)",
    )
    skippedPlugins = serializers.ListField(
        child=serializers.CharField(), help_text="score plugins PreScore skipped for this pod"
    )
    admissionDefaults = serializers.ListField(
        child=serializers.CharField(),
        help_text="what API defaulting and admission added to a pod given as text",
    )
    caveats = serializers.ListField(child=serializers.CharField())
    nodes = CycleNodeSerializer(many=True)


class AnswerSerializer(serializers.Serializer):
    """Where kube-scheduler puts the pod: the product's one answer."""

    outcome = serializers.ChoiceField(choices=["scheduled", "unschedulable"])
    pick = serializers.ListField(
        child=serializers.CharField(),
        help_text="the tie group kube-scheduler picks from at random (empty: unschedulable)",
    )
    tie = serializers.BooleanField()
    finalTotal = serializers.IntegerField(allow_null=True)
    feasible = serializers.IntegerField(help_text="nodes that pass every filter, the policy's too")
    nodes = serializers.IntegerField()
    reasons = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="why nodes are rejected -> how many (FailedScheduling's counts)",
    )
    policyApplies = serializers.BooleanField()
    failedScheduling = serializers.CharField(
        allow_null=True,
        help_text="an unschedulable pod's FailedScheduling message, whole (null: placed)",
    )
    summary = serializers.CharField(
        help_text="lands on X, lands on one of X, Y (a tie), or unschedulable: and the "
        "FailedScheduling message"
    )


class PreviewResultSerializer(serializers.Serializer):
    policy = serializers.CharField()
    version = serializers.CharField()
    pod = serializers.CharField()
    admissionDefaults = serializers.ListField(
        child=serializers.CharField(),
        help_text="what API defaulting and admission added to the pod before it was judged",
    )
    cluster = serializers.DictField()
    answer = AnswerSerializer()
    result = serializers.DictField(
        help_text="the policy alone over every node (policy-level), each with its policy rank"
    )
    kubeScheduler = KubeSchedulerCycleSerializer()
    compare = serializers.DictField(
        required=False,
        allow_null=True,
        help_text="against the active version: moves, summary, pickBefore/After, "
        "feasibleBefore/After/Added/Removed, reasonsBefore/After, changes (nodes whose verdict "
        "or final total changes, with their final ranks)",
    )


class TestCaseSerializer(serializers.Serializer):
    name = serializers.CharField()
    pod = serializers.CharField()
    cluster = serializers.CharField(allow_blank=True)
    expect = serializers.DictField()
    createdAt = serializers.DateTimeField()


class PendingProcessSerializer(serializers.Serializer):
    process = serializers.CharField(help_text="host:pid of the extender process.")
    role = serializers.CharField(
        help_text="listener (a worker of the extender's listener; the children it forks for"
        " large bodies serve what it serves)."
    )
    counter = serializers.IntegerField(help_text="The published set it serves.")
    policies = serializers.DictField(
        child=serializers.CharField(), help_text="schedulerName -> policy/vN it serves."
    )
    seenSecondsAgo = serializers.FloatField()


class ServedSerializer(serializers.Serializer):
    """Which extender processes serve the change (issue 24)."""

    servedByAll = serializers.BooleanField(
        help_text="Every live extender process confirmed it serves the change before the answer."
    )
    counter = serializers.IntegerField(allow_null=True, help_text="The published set's counter.")
    processes = serializers.IntegerField(help_text="Live extender processes.")
    confirmed = serializers.ListField(child=serializers.CharField())
    notConfirmed = PendingProcessSerializer(many=True)
    waitedSeconds = serializers.FloatField()
    summary = serializers.CharField()
    error = serializers.CharField(allow_blank=True)


class PublishResultSerializer(serializers.Serializer):
    version = VersionSummarySerializer()
    role = serializers.ChoiceField(
        choices=["active", "shadow", "canary"], help_text="The new version's rollout role."
    )
    tests = TestResultSerializer(many=True)
    served = ServedSerializer()


class RollbackResultSerializer(VersionSummarySerializer):
    served = ServedSerializer()


class DeactivateResultSerializer(PolicySerializer):
    served = ServedSerializer()


class DiffSerializer(serializers.Serializer):
    fromVersion = serializers.IntegerField()
    toVersion = serializers.IntegerField()
    unified = serializers.CharField(allow_blank=True)
    rules = serializers.DictField()


class AuditEventSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    actor = serializers.CharField()
    action = serializers.CharField()
    policy = serializers.CharField(allow_blank=True)
    version = serializers.IntegerField(allow_null=True)
    detail = serializers.DictField()
    createdAt = serializers.DateTimeField()


class TokenSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField()
    user = serializers.CharField()
    createdAt = serializers.DateTimeField()
    lastUsedAt = serializers.DateTimeField(allow_null=True)
    revokedAt = serializers.DateTimeField(allow_null=True)


class NewTokenSerializer(TokenSerializer):
    token = serializers.CharField(help_text="The secret; shown only now.")


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    role = serializers.CharField(allow_null=True)


class DecisionSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    createdAt = serializers.DateTimeField()
    pod = serializers.DictField()
    policy = serializers.CharField()
    version = serializers.IntegerField()
    verb = serializers.CharField()
    chosenNode = serializers.CharField(allow_blank=True)
    chosenAt = serializers.DateTimeField(allow_null=True)
    scores = serializers.ListField(child=serializers.CharField())
    weights = serializers.ListField(child=serializers.IntegerField())
    nodes = serializers.ListField(child=serializers.DictField())
    catchUp = serializers.DictField(
        allow_null=True,
        help_text="Set when the request waited for the snapshot to catch up (a node or the pod it "
        "did not hold yet): waitedMs, outcome (caught-up, timed-out: failurePolicy applied), the "
        "nodes and whether the pod was waited for.",
    )


class ShadowStatusSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    message = serializers.CharField(allow_blank=True)
    schedulerNames = serializers.ListField(child=serializers.CharField())
    since = serializers.DateTimeField()
    by = serializers.CharField(allow_null=True)


class ShadowRecordSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    at = serializers.DateTimeField()
    pod = PodRefSerializer()
    outcome = serializers.CharField()
    shadowVersion = serializers.IntegerField()
    activeVersion = serializers.IntegerField(allow_null=True)
    candidates = serializers.IntegerField()
    evalMs = serializers.FloatField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    difference = serializers.DictField(allow_null=True)
    chosenNode = serializers.CharField(allow_blank=True)
    pick = serializers.DictField(
        allow_null=True,
        help_text="kube-scheduler's pick (its tie group) under each version, from the model, "
        "added seconds after the record: {active, shadow, differs} or {error}.",
    )
    breakdowns = serializers.BooleanField(help_text="Both node breakdowns were kept.")
    nodes = serializers.DictField(help_text="{shadow, active}: scores, nodes, winners.")


class ShadowReportSerializer(serializers.Serializer):
    policy = serializers.CharField()
    shadow = ShadowStatusSerializer(allow_null=True)
    version = serializers.IntegerField(allow_null=True)
    window = serializers.DictField()
    summary = serializers.DictField(child=serializers.IntegerField())
    count = serializers.IntegerField()
    next = serializers.CharField(allow_null=True)
    previous = serializers.CharField(allow_null=True)
    results = ShadowRecordSerializer(many=True)
