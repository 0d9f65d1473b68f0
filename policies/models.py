"""Database models: policies and their immutable versions, activations, test cases, audit,
API tokens, cluster sync runs and sampled extender decisions.

Business rules live in services.py (writes) and selectors.py (reads); models hold data and the
invariants the database itself enforces (one active version per policy, unique numbers).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Policy(models.Model):
    """A named policy: its editable draft and, through versions, what was published."""

    name = models.CharField(max_length=63, unique=True)
    description = models.TextField(blank=True)
    draft = models.TextField(help_text="The draft document (YAML or JSON) as its author wrote it.")
    draft_revision = models.PositiveIntegerField(
        default=1, help_text="Bumped on every draft save; the ETag."
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def etag(self) -> str:
        return f'"{self.pk}-{self.draft_revision}"'


class PolicyVersion(models.Model):
    """An immutable published document; numbers count up from 1 per policy."""

    policy = models.ForeignKey(Policy, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    document = models.TextField()
    content_hash = models.CharField(max_length=64, help_text="sha256 of the document text.")
    scheduler_names = models.JSONField(default=list)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    message = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["policy", "-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["policy", "number"], name="unique_version_number_per_policy"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.policy.name} v{self.number}"


class PolicyActivation(models.Model):
    """Which version serves, in which rollout role, and since when: the activation history.

    `role` (issue 25): `active` answers kube-scheduler; `shadow` is evaluated beside it after
    each answer and only recorded; `canary` answers for a share of the pods (a percentage by
    pod uid, or a label selector: `rollout["share"]`), the active version (then "stable") for the
    rest, under a guard (`rollout["guard"]`) that rolls it back by itself; a schedulerName has
    a shadow or a canary, never both at once. `active` (the flag) says
    the row is in force. At most one row in force per policy and role, enforced by a partial
    unique constraint (NetBox's ConfigRevision pattern): since a policy owns its schedulerNames
    (one active policy per schedulerName) and a shadow is a version of the active version's own
    policy, this is also at most one shadow per schedulerName. Deactivating a policy leaves none.
    """

    class Reason(models.TextChoices):
        PUBLISH = "publish"
        ROLLBACK = "rollback"
        PROMOTE = "promote"

    class Role(models.TextChoices):
        ACTIVE = "active"
        SHADOW = "shadow"
        CANARY = "canary"

    policy = models.ForeignKey(Policy, on_delete=models.CASCADE, related_name="activations")
    version = models.ForeignKey(PolicyVersion, on_delete=models.PROTECT, related_name="activations")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.ACTIVE)
    active = models.BooleanField(default=True, help_text="In force (in its role).")
    rollout = models.JSONField(
        default=dict,
        blank=True,
        help_text="A canary's share {percent | selector}, guard {rejectedRate, errorRate, "
        "minPods} and promoteAfterSeconds; empty for other roles.",
    )
    reason = models.CharField(max_length=16, choices=Reason.choices)
    activated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    activated_at = models.DateTimeField(auto_now_add=True)
    deactivated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-activated_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["policy", "role"],
                condition=Q(active=True),
                name="one_version_in_force_per_policy_and_role",
            ),
        ]

    def __str__(self) -> str:
        state = self.role if self.active else "inactive"
        return f"{self.policy_id}: version {self.version_id} ({state})"


class PolicyTestCase(models.Model):
    """A pod and what the policy must do with it; publish runs them all first."""

    policy = models.ForeignKey(Policy, on_delete=models.CASCADE, related_name="test_cases")
    name = models.CharField(max_length=63)
    pod = models.TextField(help_text="Pod manifest, YAML or JSON.")
    cluster = models.TextField(
        blank=True,
        help_text="Empty: the current snapshot; 'demo'; or kubectl JSON of nodes and pods.",
    )
    expect = models.JSONField(help_text="applies, winner, verdicts, rejectedBy, extenderScores.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["policy", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["policy", "name"], name="unique_test_case_name_per_policy"
            )
        ]

    def __str__(self) -> str:
        return self.name


class AuditEvent(models.Model):
    """Who changed what, when; written in the same transaction as the change."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=40, db_index=True)
    policy_name = models.CharField(max_length=63, blank=True, db_index=True)
    version = models.PositiveIntegerField(null=True, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.actor_name} {self.action} {self.policy_name}"


class ApiToken(models.Model):
    """A per-user token for automation; only its hash is stored."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(
        max_length=12, help_text="First characters, to recognise a token in lists."
    )
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class SyncRun(models.Model):
    """One run of the cluster watcher (list, then watch until it ends) for the UI and API."""

    class Status(models.TextChoices):
        RUNNING = "running"
        OK = "ok"
        ERROR = "error"

    cluster = models.CharField(max_length=63, default="default")
    source = models.CharField(max_length=16)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField(auto_now_add=True, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    nodes = models.PositiveIntegerField(default=0)
    pods = models.PositiveIntegerField(default=0)
    events = models.PositiveIntegerField(default=0)
    snapshot_version = models.BigIntegerField(default=0)

    class Meta:
        ordering = ["-started_at", "-pk"]

    def __str__(self) -> str:
        return f"sync {self.cluster} {self.status}"


class Decision(models.Model):
    """A sampled extender decision: the pod, the answering version and every node's outcome."""

    created_at = models.DateTimeField(db_index=True)
    pod_namespace = models.CharField(max_length=253)
    pod_name = models.CharField(max_length=253)
    pod_uid = models.CharField(max_length=64, db_index=True)
    policy_name = models.CharField(max_length=63, db_index=True)
    policy_version = models.PositiveIntegerField()
    verb = models.CharField(max_length=16)
    role = models.CharField(
        max_length=16,
        default="active",
        help_text="The judging version's rollout role: active (it answered) or shadow (it was "
        "only evaluated after the answer; `nodes` then also holds the active version's).",
    )
    arm = models.CharField(
        max_length=8,
        blank=True,
        help_text="During a canary, which version judged the pod: canary or stable (the "
        "active version); empty otherwise.",
    )
    shadow_outcome = models.CharField(
        max_length=16,
        blank=True,
        help_text="A shadow record's outcome against the active version: same, nodes, moved, "
        "rejected (no feasible node), error, or skipped (not judged: the process was busy).",
    )
    nodes = models.JSONField(
        help_text="Per-node verdict, failing rule, message, scores, total, extender score."
    )
    chosen_node = models.CharField(max_length=253, blank=True)
    chosen_at = models.DateTimeField(null=True, blank=True)
    pod_manifest = models.TextField(
        blank=True,
        help_text="The judged pod (labels, annotations, spec) as JSON, so the playground can "
        "open it after the pod is gone; empty when it was too large to keep.",
    )

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["role", "policy_name", "created_at"], name="decision_role_window")
        ]

    def __str__(self) -> str:
        return f"{self.pod_namespace}/{self.pod_name} by {self.policy_name} v{self.policy_version}"


class ShadowTally(models.Model):
    """How many pods one extender process's shadow judged over about a second, by outcome
    (issue 25): the report's counts are these sums, exact, while only a sample of the pods
    judged differently is kept as Decision rows (policies/extender/shadow.py)."""

    created_at = models.DateTimeField(db_index=True)
    policy_name = models.CharField(max_length=63)
    policy_version = models.PositiveIntegerField(help_text="The shadow version.")
    active_version = models.PositiveIntegerField(help_text="The version that answered.")
    # Judgements by outcome (policies/rollout/selectors.py: OUTCOMES), summed over a window.
    same = models.PositiveIntegerField(default=0)
    nodes = models.PositiveIntegerField(default=0)
    moved = models.PositiveIntegerField(default=0)
    rejected = models.PositiveIntegerField(default=0)
    error = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["policy_name", "created_at"], name="shadow_tally_window")]

    def __str__(self) -> str:
        return f"{self.policy_name} v{self.policy_version} at {self.created_at:%Y-%m-%d %H:%M:%S}"


class SchedulerProfile(models.Model):
    """The KubeSchedulerConfiguration the previews model, one row per installation (pk 1).
    Empty text: the configuration `schedulerconfig` prints (kube-scheduler's default profile
    with the extender at weight 1)."""

    text = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    def __str__(self) -> str:
        return "scheduler profile" + (" (pasted)" if self.text else " (default)")


class SharedPreview(models.Model):
    """A playground state someone shared as a link (/s/<token>/): the editor's text, the pod,
    the cluster source and the snapshot it was previewed on. Any signed-in viewer can open it
    until it expires (SCHEDWEB_SHARE_DAYS); it never changes the policy's draft."""

    token = models.CharField(max_length=32, unique=True)
    policy = models.ForeignKey(Policy, on_delete=models.CASCADE, related_name="shares")
    document = models.TextField()
    pod = models.CharField(
        max_length=600, help_text="The pod picker's value (ns/name, example:…, pasted)."
    )
    pasted = models.TextField(blank=True, help_text="A pasted manifest, when pod is 'pasted'.")
    pod_manifest = models.TextField(
        blank=True, help_text="A snapshot pod's manifest at share time, used once the pod is gone."
    )
    cluster = models.CharField(max_length=16, blank=True)
    what_if = models.TextField(blank=True, help_text="What-if edits of the shared preview.")
    snapshot = models.CharField(max_length=64, blank=True, help_text="source:version shared on.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"share {self.token[:6]}… of {self.policy.name}"
