"""Reads: cluster sources as the engine sees them, and pods given as text.

Every caller of the engine (the `evaluate` command, the REST preview, the playground, test cases)
loads its inputs here, so that they all see the same cluster for the same source name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from policies.cluster.convert import ConversionError, pod_view
from policies.cluster.files import ClusterFileError
from policies.engine.inputs import NodeView, PodView

MAX_POD_BYTES = 256 * 1024


class InputError(ValueError):
    """Input that cannot be used (a pod that is not a Pod, an unreadable cluster file)."""


class ClusterUnavailable(RuntimeError):
    """No snapshot of the requested cluster source exists yet."""


@dataclass
class LoadedCluster:
    """A frozen cluster snapshot plus where it came from, for display and staleness.

    `stale` means "may be behind the real cluster": the watcher reports an error, has not
    reported for SCHEDWEB_SNAPSHOT_STALE_SECONDS, or Redis could not be read for that long;
    `error` says why in plain words. A snapshot is never empty for lack of data: without
    one, loaders raise ClusterUnavailable."""

    state: Any  # a frozen ClusterSnapshot (ClusterView)
    source: str  # demo | file | live | inline
    label: str
    version: int = 0
    age_seconds: float | None = None  # since the source last confirmed it current
    stale: bool = False
    status: str = "ok"  # ok | stale | error | starting
    error: str = ""
    updated_at: float | None = None  # Unix time of that confirmation (age = now - this)
    details: dict[str, Any] = field(default_factory=dict)  # source-specific status fields

    def nodes(self) -> list[NodeView]:
        return self.state.nodes()

    def describe(self) -> str:
        return self.label


def cluster_load(source: str) -> LoadedCluster:
    """`demo`, `live` (the watcher's snapshot in Redis) or the path of a kubectl JSON/YAML file.
    InputError for an unusable file, ClusterUnavailable when live has no snapshot."""
    from policies.cluster.sources import cluster_source  # Redis and kubernetes: loaded lazily

    return cluster_source(source).snapshot()


def parse_manifest(text: str, *, what: str = "pod") -> dict[str, Any]:
    """YAML or JSON text of one Kubernetes object -> dict, or InputError."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_POD_BYTES:
        raise InputError(f"the {what} is larger than {MAX_POD_BYTES // 1024} KiB")
    if not text.strip():
        raise InputError(f"the {what} is empty")
    try:
        data = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise InputError(
            f"the {what} is not valid YAML or JSON{where}: {getattr(exc, 'problem', exc)}"
        ) from None
    if not isinstance(data, dict):
        raise InputError(
            f"the {what} must be a mapping (a Kubernetes object), got {type(data).__name__}"
        )
    return data


def pod_view_from_object(obj: dict[str, Any]) -> PodView:
    """A Pod object (dict) -> the engine's pod view; missing namespace means default."""
    kind = obj.get("kind", "Pod")
    if kind != "Pod":
        raise InputError(f"expected a Pod, got kind {kind!r}")
    obj = {**obj, "metadata": {"namespace": "default", **(obj.get("metadata") or {})}}
    try:
        return pod_view(obj)
    except ConversionError as exc:
        raise InputError(str(exc)) from None


def pod_view_from_text(text: str) -> PodView:
    """A Pod manifest as YAML or JSON text -> the engine's pod view."""
    return pod_view_from_object(parse_manifest(text))


# --- policies, versions, audit ----------------------------------------------------------------


def policy_compile(document: str):
    """`document` compiled with this installation's CEL cost budget (SCHEDWEB_CEL_COST_LIMIT),
    the same for publish, preview, tests, the extender and the commands. Raises PolicyInvalid."""
    from django.conf import settings

    from policies.engine.policy import compile_policy

    return compile_policy(document, cost_limit=settings.SCHEDWEB_CEL_COST_LIMIT)


def policy_validate(document: str) -> list:
    """Every FieldError of `document` under the same budget as policy_compile ([] = valid)."""
    from django.conf import settings

    from policies.engine.policy import validate_policy

    return validate_policy(document, cost_limit=settings.SCHEDWEB_CEL_COST_LIMIT)


def policy_get_active(*, policy) -> Any:
    """The active PolicyVersion of `policy`, or None."""
    from policies.models import PolicyActivation

    activation = (
        PolicyActivation.objects.filter(policy=policy, active=True)
        .select_related("version")
        .first()
    )
    return activation.version if activation else None


def policy_list(*, search: str = "", active: bool | None = None, scheduler_name: str = ""):
    """Policies with their active and latest version numbers annotated."""
    from django.db.models import Max, OuterRef, Q, Subquery

    from policies.models import Policy, PolicyActivation

    active_number = PolicyActivation.objects.filter(policy=OuterRef("pk"), active=True).values(
        "version__number"
    )[:1]
    queryset = Policy.objects.select_related("owner").annotate(
        active_number=Subquery(active_number), latest_number=Max("versions__number")
    )
    if search:
        queryset = queryset.filter(Q(name__icontains=search) | Q(description__icontains=search))
    if active is not None:
        queryset = queryset.filter(active_number__isnull=not active)
    if scheduler_name:
        ids = [
            a.policy_id
            for a in PolicyActivation.objects.filter(active=True).select_related("version")
            if scheduler_name in a.version.scheduler_names
        ]
        queryset = queryset.filter(pk__in=ids)
    return queryset.order_by("name")


def policy_scheduler_names(*, document: str) -> list[str]:
    """schedulerNames of a stored (valid) document, for listings."""
    try:
        data = yaml.safe_load(document)
        return [str(n) for n in data.get("schedulerNames", [])]
    except Exception:  # a stored draft is valid; be tolerant anyway
        return []


def version_diff(*, policy, a: int, b: int) -> dict[str, Any]:
    """Unified text diff of two versions plus which rules were added, removed or changed."""
    import difflib

    from django.http import Http404

    from policies.models import PolicyVersion

    versions = {v.number: v for v in PolicyVersion.objects.filter(policy=policy, number__in=[a, b])}
    for number in (a, b):
        if number not in versions:
            raise Http404(f"policy {policy.name} has no version {number}")
    old, new = versions[a].document, versions[b].document
    unified = "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), f"v{a}", f"v{b}"
        )
    )
    return {"fromVersion": a, "toVersion": b, "unified": unified, "rules": _rule_changes(old, new)}


def _rules_of(document: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(document) or {}
    except yaml.YAMLError:
        return {}
    rules = {}
    for key in ("matchConditions", "variables", "filters", "scores"):
        for item in data.get(key) or []:
            if isinstance(item, dict) and "name" in item:
                rules[f"{key}/{item['name']}"] = item
    for key in ("schedulerNames", "failurePolicy"):
        if key in data:
            rules[key] = data[key]
    return rules


def _rule_changes(old: str, new: str) -> dict[str, list[str]]:
    before, after = _rules_of(old), _rules_of(new)
    return {
        "added": sorted(set(after) - set(before)),
        "removed": sorted(set(before) - set(after)),
        "changed": sorted(k for k in set(before) & set(after) if before[k] != after[k]),
    }


def audit_list(*, policy_name: str = "", action: str = "", actor: str = ""):
    from policies.models import AuditEvent

    queryset = AuditEvent.objects.all()
    if policy_name:
        queryset = queryset.filter(policy_name=policy_name)
    if action:
        queryset = queryset.filter(action=action)
    if actor:
        queryset = queryset.filter(actor_name=actor)
    return queryset


# --- previews and test cases ------------------------------------------------------------------


def cluster_default() -> LoadedCluster:
    """The configured cluster source (SCHEDWEB_CLUSTER_SOURCE)."""
    from django.conf import settings

    source = settings.SCHEDWEB_CLUSTER_SOURCE
    if source == "file":
        return cluster_load(str(settings.SCHEDWEB_CLUSTER_FILE))
    return cluster_load(source)


def cluster_from_text(text: str) -> LoadedCluster:
    """A cluster given inline (a test case's kubectl JSON/YAML)."""
    from policies.cluster.files import load_cluster_bytes

    try:
        state = load_cluster_bytes(text.encode(), name="the test case's cluster")
    except ClusterFileError as exc:
        raise InputError(str(exc)) from None
    return LoadedCluster(state=state.freeze(), source="inline", label="inline")


def pod_from_cluster(*, cluster: LoadedCluster, namespace: str, name: str) -> PodView:
    """A pod of the snapshot by namespace and name (a pending pod to preview)."""
    for pod in cluster.state.pods():
        if pod["namespace"] == namespace and pod["name"] == name:
            return pod
    raise InputError(f"pod {namespace}/{name} is not in the {cluster.describe()} cluster")


def preview_run(*, compiled, pod: PodView, cluster: LoadedCluster):
    """The per-node evaluation every preview shows (same code as the extender)."""
    return compiled.evaluate(pod, cluster.nodes(), cluster.state)


def test_cases_run(
    *, policy, compiled, cluster: LoadedCluster | None = None
) -> list[dict[str, Any]]:
    """Runs a stored policy's test cases; [{name, passed, failures}]."""
    from policies.engine.testcases import check_expectations

    results = []
    for case in policy.test_cases.all():
        results.append(
            _run_case(
                compiled,
                case.name,
                case.pod,
                case.cluster,
                case.expect,
                cluster,
                check_expectations,
            )
        )
    for (
        case
    ) in compiled.spec.tests:  # the document's own `tests:` (cluster: demo, snapshot or a file)
        source = case.get("cluster") or "demo"
        if source not in ("demo", "snapshot"):
            results.append(
                {
                    "name": case["name"],
                    "passed": False,
                    "failures": [
                        f"cluster file {source!r} is only read by `manage.py policy test`; use demo or snapshot"
                    ],
                }
            )
            continue
        results.append(
            _run_case(
                compiled,
                case["name"],
                case["pod"],
                "" if source == "snapshot" else "demo",
                case["expect"],
                cluster,
                check_expectations,
            )
        )
    return results


def _run_case(
    compiled, name, pod_source, cluster_source, expect, default_cluster, check
) -> dict[str, Any]:
    try:
        pod = pod_view_from_object(
            pod_source if isinstance(pod_source, dict) else parse_manifest(pod_source)
        )
        if not cluster_source:
            target = default_cluster or cluster_default()
        elif cluster_source == "demo":
            target = cluster_load("demo")
        else:
            target = cluster_from_text(cluster_source)
    except (InputError, ClusterUnavailable) as exc:
        return {"name": name, "passed": False, "failures": [str(exc)]}
    evaluation = preview_run(compiled=compiled, pod=pod, cluster=target)
    failures = check(evaluation, expect)
    return {"name": name, "passed": not failures, "failures": failures}


def scheduler_names_active() -> list[str]:
    """Every schedulerName served by an active policy version."""
    from policies.models import PolicyActivation

    names: set[str] = set()
    for activation in PolicyActivation.objects.filter(active=True).select_related("version"):
        names.update(activation.version.scheduler_names)
    return sorted(names)


def decision_list(*, pod: str = "", namespace: str = "", policy: str = "", node: str = ""):
    """Recorded extender decisions, newest first, filtered."""
    from policies.models import Decision

    queryset = Decision.objects.all()
    if pod:
        queryset = queryset.filter(pod_name=pod)
    if namespace:
        queryset = queryset.filter(pod_namespace=namespace)
    if policy:
        queryset = queryset.filter(policy_name=policy)
    if node:
        queryset = queryset.filter(chosen_node=node)
    return queryset
