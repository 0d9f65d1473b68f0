"""Evaluation for every caller that is not the extender: compile, preview, test cases.

One cached, budgeted `policy_compile`; one `preview_run` that the REST preview, the playground,
background previews, the decision pages and `evaluate` call, whose answer is kube-scheduler's
pick (`Preview.placement`, built from the model's cycle by `placement_from_cycle`); one
test-case runner with one meaning of a test's cluster. The extender compiles with the same
`policy_compile` and evaluates with the same engine (`policies/extender/service.py`); parity
tests hold the two to the same numbers.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from django.conf import settings

from policies import selectors
from policies.cluster.files import read_regular_file
from policies.cluster.loaded import LoadedCluster
from policies.cluster.manifest import pod_view_from_source
from policies.cluster.sources import (
    cluster_default,
    cluster_from_bytes,
    cluster_from_text,
    cluster_load,
)
from policies.engine.cel.deadline import EvaluationTimeout, deadline
from policies.engine.compare import compare_placements
from policies.engine.document import FieldError, PolicyInvalid
from policies.engine.inputs import PodView
from policies.engine.placement import NodePlacement, Placement
from policies.engine.policy import CompiledPolicy, compile_policy, validate_policy
from policies.engine.queue import QueueKey, queue_order
from policies.engine.results import Evaluation
from policies.engine.testcases import (
    check_expectations,
    expectation_changes,
    needs_placement,
    rerecord,
)
from policies.errors import ClusterUnavailable, EvaluationTooSlow, InputError
from policies.schedmodel.advisor import WeightAdvice, weight_advise
from policies.schedmodel.pipeline import Cycle, cycle_run
from policies.schedmodel.profile import (
    FILTERS,
    Profile,
    ProfileInvalid,
    profile_default,
    profile_parse,
)

# --- compiling -------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _compile(text: str, cost_limit: int) -> tuple[CompiledPolicy | None, tuple[FieldError, ...]]:
    try:
        return compile_policy(text, cost_limit=cost_limit), ()
    except PolicyInvalid as exc:
        return None, tuple(exc.errors)


def policy_compile(document: str) -> CompiledPolicy:
    """`document` compiled under this installation's CEL budget (SCHEDWEB_CEL_COST_LIMIT), the
    same for publish, previews, test cases, the extender and the commands; raises PolicyInvalid.

    Cached by text: the playground previews the same text again when only the pod or the
    compare toggle changes, and a background preview compiles once for all its pods. A compiled
    policy is immutable, so sharing it is safe."""
    compiled, errors = _compile(document, settings.SCHEDWEB_CEL_COST_LIMIT)
    if compiled is None:
        raise PolicyInvalid(list(errors))
    return compiled


def policy_validate(document: str) -> list[FieldError]:
    """Every FieldError of `document` under the same budget as policy_compile ([] = valid)."""
    return validate_policy(document, cost_limit=settings.SCHEDWEB_CEL_COST_LIMIT)


# --- the scheduler profile -----------------------------------------------------------------


@functools.lru_cache(maxsize=32)
def profile_from_text(text: str, scheduler_name: str | None = None) -> Profile:
    """The profile of a stored configuration for pods of `scheduler_name`: its profile of that
    schedulerName, else its first one ("" = the default). Cached by text and name."""
    if not text.strip():
        return profile_default()
    try:
        return profile_parse(text, scheduler_name=scheduler_name)
    except ProfileInvalid:
        try:  # no profile of that name (the text was valid when stored): the first one
            return profile_parse(text)
        except ProfileInvalid:  # stored before a stricter parser
            return profile_default()


def profile_active(*, scheduler_name: str | None = None) -> Profile:
    """The profile every preview models: this installation's stored configuration (the Connect
    page; its profile for `scheduler_name`), else the one `schedulerconfig` prints. One
    primary-key read; parsed once per text."""
    return profile_from_text(selectors.scheduler_profile_text(), scheduler_name)


def profile_from_file(path: str) -> Profile:
    """The profile of a KubeSchedulerConfiguration file (`evaluate --scheduler-config`);
    raises InputError listing every problem with its field path."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(
            f"cannot read the scheduler configuration {path}: {exc.strerror}"
        ) from None
    try:
        return profile_parse(text)
    except ProfileInvalid as exc:
        raise InputError(
            f"{path}: the scheduler configuration is invalid: " + "; ".join(exc.errors),
            details=exc.errors,
        ) from None


# --- the wall-clock guard of requests a person waits for ----------------------------------------


@contextmanager
def request_guard() -> Iterator[None]:
    """Around a preview or validation request: compiling (reading the YAML, parsing, type
    checking, cost estimation, constant folding, code generation) and evaluating inside stop
    once SCHEDWEB_PREVIEW_SECONDS have passed, and the request fails with EvaluationTooSlow
    (503) instead of holding its worker. Cooperative (policies/engine/cel/deadline.py): the
    engine looks at the clock between nodes, rules and compile phases, every few thousand cost
    units, tokens, syntax nodes or checked nodes, and at every YAML node."""
    seconds = settings.SCHEDWEB_PREVIEW_SECONDS
    try:
        with deadline(seconds):
            yield
    except EvaluationTimeout:
        raise EvaluationTooSlow(
            f"the policy took longer than {seconds:g} s to compile and evaluate and was stopped;"
            " simplify its expressions or try a smaller cluster"
        ) from None


# --- previews --------------------------------------------------------------------------------


def placement_from_cycle(cycle: Cycle, *, applies: bool | None = None) -> Placement:
    """kube-scheduler's answer from the model's cycle, as the engine's plain Placement: per
    node the plugin or policy rule that rejects it, its final total and the policy's total and
    score as the extender answered them (over the nodes kube-scheduler sent it); for an
    unschedulable pod, the model's whole FailedScheduling message."""
    ev = cycle.evaluation
    scored = {}
    if ev is not None and ev.applies and ev.scored:
        scored = {
            name: (ev.total[i], ev.extender[i])
            for i, name in enumerate(ev.node_names)
            if ev.passed[i]
        }
    nodes = []
    for o in cycle.outcomes:
        total, score = scored.get(o.node, (None, None))
        rejected = o.plugin is None and o.policy_passed is False
        nodes.append(
            NodePlacement(
                node=o.node,
                plugin=o.plugin,
                plugin_reasons=tuple(o.reasons),
                rule=(o.policy_rule or "policy") if rejected else None,
                message=o.policy_message if rejected else None,
                final=o.total,
                policy_total=total,
                policy_score=score,
            )
        )
    if applies is None:  # the cycle knows when a node reached the extender
        applies = ev is None or ev.applies
    return Placement(
        tuple(nodes),
        tuple(cycle.pick),
        applies=applies,
        filter_plugins=FILTERS,
        failed_scheduling=cycle.failed_scheduling(),
    )


@dataclass(frozen=True)
class Preview:
    """One pod evaluated by a document over a cluster, and optionally by a second document
    (the published version) for comparison. `placement` is the answer: where kube-scheduler
    puts the pod with the policy served by its extender."""

    compiled: CompiledPolicy
    pod: PodView
    cluster: LoadedCluster
    evaluation: Evaluation  # the policy alone over every node (the rule table, policy-level)
    # kube-scheduler's cycle around the policy: its filters, the policy over the nodes that
    # pass them (minmax over that set, as the extender sees it), its scores, total and pick
    cycle: Cycle
    placement: Placement  # the cycle as the engine's plain answer
    before: Placement | None = None  # the compared document's answer
    comparison: dict[str, Any] | None = None  # compare_placements(before, placement)
    compare_error: PolicyInvalid | None = None  # the compared document no longer compiles


def preview_run(
    *,
    document: str,
    pod: PodView,
    cluster: LoadedCluster,
    compare_document: str | None = None,
    profile: Profile | None = None,
) -> Preview:
    """kube-scheduler's cycle for `pod` with `document` served by the extender, under
    `profile` (default: the configuration `schedulerconfig` prints), and the policy alone over
    every node of the snapshot (the rule table).

    With `compare_document` (the published version), the same cycle with it and what would
    change in the cluster (compare_placements: the pick, the feasible set, the reasons).
    Raises PolicyInvalid for `document`; an invalid `compare_document` (an old version the
    engine no longer accepts) is reported in `compare_error` instead."""
    compiled = policy_compile(document)
    nodes = cluster.nodes()
    evaluation = compiled.evaluate(pod, nodes, cluster.state)
    cycle = cycle_run(pod=pod, nodes=nodes, state=cluster.state, policy=compiled, profile=profile)
    placement = placement_from_cycle(cycle, applies=evaluation.applies)
    preview = Preview(compiled, pod, cluster, evaluation, cycle, placement)
    if compare_document is None:
        return preview
    try:
        published = policy_compile(compare_document)
    except PolicyInvalid as exc:
        return replace(preview, compare_error=exc)
    before = placement_from_cycle(
        cycle_run(pod=pod, nodes=nodes, state=cluster.state, policy=published, profile=profile),
        applies=published.applies_to(pod),
    )
    return replace(preview, before=before, comparison=compare_placements(before, placement))


def preview_dict(preview: Preview) -> dict[str, Any]:
    """The REST preview's and `evaluate --json`'s body below `pod` and `cluster`: `answer`
    (where kube-scheduler puts the pod), `result` (the policy alone over every node, each with
    its policy rank there) and `kubeScheduler` (the cycle; each node with its policy score and
    rank among the nodes the extender scored)."""
    cycle = preview.cycle.to_dict()
    policy_ranks = preview.placement.policy_ranks()
    for node in cycle["nodes"]:
        placed = preview.placement.node(node["node"])
        node["policyTotal"] = (
            round(placed.policy_total, 4)
            if placed is not None and placed.policy_total is not None
            else None
        )
        node["policyRank"] = policy_ranks.get(node["node"])
    return {
        "answer": preview.placement.to_dict(),
        "result": preview.evaluation.to_dict(),
        "kubeScheduler": cycle,
    }


def policy_leaves_a_node(*, document: str, pod: PodView, cluster: LoadedCluster) -> bool:
    """Whether the policy's own filters let `pod` through on at least one node (or the policy
    does not apply to it). PolicyInvalid for a document that does not compile."""
    evaluation = policy_compile(document).evaluate(pod, cluster.nodes(), cluster.state)
    return not evaluation.applies or any(evaluation.passed)


def pods_pending(*, cluster: LoadedCluster) -> list[PodView]:
    """Pods of the snapshot waiting for a node, in a stable order (namespace, name)."""
    pending = [p for p in cluster.state.pods() if not p["nodeName"] and p["phase"] == "Pending"]
    pending.sort(key=lambda p: (p["namespace"], p["name"]))
    return pending


QUEUE_PREVIEW_MAX_PODS = 500  # rows a queue preview returns (the order is over all of them)


@dataclass(frozen=True)
class QueuePreview:
    """The pending pods of the policy's schedulerNames in the order kube-scheduler's queue
    would pop them under the document's `queue:` (first `QUEUE_PREVIEW_MAX_PODS` rows)."""

    compiled: CompiledPolicy
    cluster: LoadedCluster
    rows: list[tuple[PodView, QueueKey]]
    total: int


def queue_preview_run(*, document: str, cluster: LoadedCluster) -> QueuePreview:
    """Each pending pod's queue key under `document`, in queue order. Raises PolicyInvalid;
    a document without `queue:` gives every pod its own priority (the order today)."""
    compiled = policy_compile(document)
    namespaces = cluster.state.namespaces()
    rows = [
        (pod, compiled.queue_key(pod, namespaces.get(pod["namespace"]), cluster.state))
        for pod in pods_pending(cluster=cluster)
        if compiled.applies_to(pod)
    ]
    ordered = queue_order(rows)
    return QueuePreview(compiled, cluster, ordered[:QUEUE_PREVIEW_MAX_PODS], len(ordered))


# --- the weight advisor ----------------------------------------------------------------------

EXAMPLE_PODS = Path(__file__).resolve().parent / "examples" / "pods"


@functools.cache
def example_pod_views() -> tuple[PodView, ...]:
    """The shipped example pods (policies/examples/pods/), in file order (read once)."""
    return tuple(
        pod_view_from_source(path.read_text()) for path in sorted(EXAMPLE_PODS.glob("*.yaml"))
    )


@dataclass(frozen=True)
class WeightAdviceRun:
    """The advice over several pods: `weight` is the smallest extender weight at which
    kube-scheduler picks, for every pod the policy scores, one of the nodes the policy scores
    highest (None: it scores no node of them above another)."""

    weight: int | None
    pods: list[tuple[PodView, WeightAdvice]]


def weight_advise_run(
    *,
    document: str,
    pods: Iterable[PodView],
    cluster: LoadedCluster,
    profile: Profile | None = None,
) -> WeightAdviceRun:
    """kube-scheduler's cycle for each pod under `profile` (its extender weight does not
    matter), and the smallest extender weight at which kube-scheduler picks one of the nodes
    the policy scores highest (policies/schedmodel/advisor.py). Raises PolicyInvalid."""
    compiled = policy_compile(document)
    profile = replace(profile or profile_default(), extender_weight=1)
    nodes = cluster.nodes()
    results = []
    for pod in pods:
        cycle = cycle_run(
            pod=pod, nodes=nodes, state=cluster.state, policy=compiled, profile=profile
        )
        results.append((pod, weight_advise(cycle)))
    weights = [a.weight for _, a in results if a.weight is not None]
    return WeightAdviceRun(max(weights) if weights else None, results)


# --- test cases ------------------------------------------------------------------------------

TEST_CLUSTERS = ("demo", "snapshot")


def test_cluster_load(
    source: str, *, default: LoadedCluster | None = None, base: Path | None = None
) -> LoadedCluster:
    """The cluster a test case names. One meaning everywhere:

    - `demo`: the bundled demo cluster;
    - `snapshot` (or empty): this installation's cluster source, or `default` when given;
    - kubectl JSON/YAML text (a stored test case's own cluster, several lines or `{...}`);
    - any other string is a file path relative to the document: only `manage.py policy test`
      reads files (it passes `base`, the document's folder); elsewhere the case fails saying so.
      The path stays inside that folder and names a bounded regular file (_test_cluster_file).
    """
    if source in ("", "snapshot"):
        return default or cluster_default()
    if source == "demo":
        return cluster_load("demo")
    if "\n" in source or source.lstrip().startswith("{"):
        return cluster_from_text(source)
    if base is None:
        raise InputError(
            f"cluster file {source!r} is only read by `manage.py policy test`; use demo or snapshot"
        )
    return cluster_from_bytes(_test_cluster_file(source, base), name=source)


TEST_CLUSTER_MAX_BYTES = 64 * 1024 * 1024  # a test case's cluster file (`policy test`)


def _test_cluster_file(source: str, base: Path) -> bytes:
    """The bytes of the cluster file `source` names, relative to the document's folder `base`:
    no absolute path, nothing outside `base` (`..`, or a symbolic link leading out), a regular
    file (not /dev/zero, a FIFO, a directory) of at most TEST_CLUSTER_MAX_BYTES."""
    if "\x00" in source or Path(source).is_absolute() or source.startswith("~"):
        raise InputError(f"cluster file {source!r}: give a path relative to the document's folder")
    root = base.resolve()
    try:
        path = (root / source).resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise InputError(f"cluster file {source!r}: cannot read: {_reason(exc)}") from None
    if not path.is_relative_to(root):
        raise InputError(f"cluster file {source!r} is outside the document's folder")
    try:
        return read_regular_file(path, limit=TEST_CLUSTER_MAX_BYTES)
    except OSError as exc:
        raise InputError(f"cluster file {source!r}: cannot read: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)


def test_case_run(
    *,
    compiled: CompiledPolicy,
    name: str,
    pod: str | dict[str, Any],
    cluster: str,
    expect: dict[str, Any],
    default: LoadedCluster | None = None,
    base: Path | None = None,
    review: bool = False,
    profile: Profile | None = None,
) -> dict[str, Any]:
    """One test case: {name, passed, failures}; an unusable pod or cluster is a failure. The
    kube-scheduler-level kinds (landsIn, unschedulable, rejectedBy a plugin) are checked
    against the model's cycle under `profile` (default: this installation's configuration for
    the pod's schedulerName, profile_active). With `review`, a case that fails also gets
    `proposed` (its expectation edited to what happens now, engine.testcases.rerecord) and
    `changes` (old and new per entry)."""
    try:
        pod_view = pod_view_from_source(pod)
        target = test_cluster_load(cluster, default=default, base=base)
    except (InputError, ClusterUnavailable) as exc:
        return {"name": name, "passed": False, "failures": [str(exc)]}
    nodes = target.nodes()
    evaluation = compiled.evaluate(pod_view, nodes, target.state)
    if evaluation.stopped:  # under a budget (`policy test`): failurePolicy's verdicts
        return {"name": name, "passed": False, "failures": [f"stopped: {evaluation.stopped}"]}
    placement = None
    if needs_placement(expect) or review:
        cycle = cycle_run(
            pod=pod_view,
            nodes=nodes,
            state=target.state,
            policy=compiled,
            profile=profile or profile_active(scheduler_name=pod_view["schedulerName"]),
        )
        if cycle.evaluation is not None and cycle.evaluation.stopped:  # the budget ran out here
            stopped = cycle.evaluation.stopped
            return {"name": name, "passed": False, "failures": [f"stopped: {stopped}"]}
        placement = placement_from_cycle(cycle, applies=evaluation.applies)
    queue_key = None
    if "queueKey" in expect:
        labels = target.state.namespaces().get(pod_view["namespace"])
        queue_key = compiled.queue_key(pod_view, labels, target.state)
    failures = check_expectations(evaluation, expect, queue_key, placement)
    result: dict[str, Any] = {"name": name, "passed": not failures, "failures": failures}
    if review and failures:
        proposed = rerecord(evaluation, expect, queue_key, placement)
        result["proposed"] = proposed
        result["changes"] = expectation_changes(expect, proposed)
    return result


def test_cases_run(
    *,
    compiled: CompiledPolicy,
    stored: Iterable[Any] = (),
    cluster: LoadedCluster | None = None,
    base: Path | None = None,
    review: bool = False,
    profile: Profile | None = None,
) -> list[dict[str, Any]]:
    """A policy's stored test cases (`stored`, PolicyTestCase rows) and then the document's own
    `tests:`, each as {name, passed, failures}. `cluster` stands in for `snapshot`; `profile`
    for this installation's scheduler configuration. `review` adds what "accept new results"
    would write to each failing stored case (the document's own cases are text: they are
    edited in the document)."""
    results = [
        test_case_run(
            compiled=compiled,
            default=cluster,
            base=base,
            review=review,
            profile=profile,
            name=c.name,
            pod=c.pod,
            cluster=c.cluster,
            expect=c.expect,
        )
        for c in stored
    ]
    results += [
        test_case_run(compiled=compiled, default=cluster, base=base, profile=profile, **dict(case))
        for case in compiled.spec.tests
    ]
    return results


def policy_test_case_count(*, stored_names: Iterable[str], document: str) -> int:
    """How many test cases run for `document`: the stored ones and the document's own `tests:`
    (what test_cases_run runs and publishing checks; a badge that counted only the stored ones
    said 0 for seed 002, whose three cases are in its document). A document that does not
    compile counts its stored cases only."""
    names = set(stored_names)
    try:
        in_document = {dict(case)["name"] for case in policy_compile(document).spec.tests}
    except (PolicyInvalid, EvaluationTooSlow, EvaluationTimeout):
        in_document = set()
    return len(names | in_document)


test_case_run.__test__ = False  # not pytest tests, despite their names
test_cases_run.__test__ = False
test_cluster_load.__test__ = False
