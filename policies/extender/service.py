"""The extender's verbs over in-memory state: active policies and the cluster snapshot.

No database, Kubernetes or task round trip happens here (bind excepted: creating the binding is
the verb's job). Every answer is protocol-exact; nothing raises to the caller except
ProtocolError for a malformed body (HTTP 400).

filter and prioritize take an `Attempt` from callers that can wait for the snapshot without
holding anything up (the listener's event loop, policies/extender/entry.py): a request naming a
node (or about a pod) the snapshot does not hold yet is then answered `WAIT`, with what it lacks,
instead of by failurePolicy; the caller waits and asks again (policies/extender/catch_up.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from itertools import compress
from typing import Any

from policies.cluster.convert import ConversionError, node_view
from policies.engine.inputs import NodeView, PodView, ResourceMap
from policies.engine.policy import CompiledPolicy
from policies.rollout.split import Split
from policies.schedmodel.plugins import (
    filter_node_name,
    filter_node_unschedulable,
    filter_taints,
    node_affinity_matches,
)

from . import protocol
from .canary import CanaryCounts
from .catch_up import Attempt, Behind, CatchUp, behind_of, policy_reads_pods
from .decisions import decision_record
from .metrics import Metrics
from .pods import PodCache, pod_key
from .shadow import ShadowGovernor, ShadowJob, Shadows
from .shared import SharedEvaluations
from .windows import Windows

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ServedPolicy:
    """An active policy version as an extender serves it. `reads_pods`: its answer depends on
    the cluster's pods in the snapshot (catch_up.policy_reads_pods). `shadow`: its shadow;
    `canary`: the version that judges the pods `split` gives it (`judging`)."""

    name: str
    version: int
    compiled: CompiledPolicy
    # The version judged beside this one after each answer, never answering (issue 25).
    shadow: ServedPolicy | None = None
    # The version deciding `split`'s share of the pods instead of this one (issue 25's canary).
    canary: ServedPolicy | None = None
    split: Split | None = None
    arm: str = ""  # during a canary: "canary" or "stable" (recorded with each decision)
    guard: Any = None  # a canary's guard (policies/rollout/guard.py)
    reads_pods: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "reads_pods", policy_reads_pods(self.compiled.spec))

    @property
    def label(self) -> str:
        return f"{self.name}/v{self.version}"

    def judging(self, pod: dict[str, Any]) -> ServedPolicy:
        """The version that judges this raw Pod: the canary for its share, else this one. A
        function of the pod's uid (or labels and namespace) only, so every call about the pod
        (filter, prioritize, bind), in every process and replica, gets the same version."""
        if self.canary is not None and self.split is not None and self.split.canary_of_object(pod):
            return self.canary
        return self

    def judging_view(self, pod: PodView) -> ServedPolicy:
        """`judging` for a pod of the snapshot (bind's re-check)."""
        split = self.split
        if self.canary is not None and split is not None:
            return (
                self.canary if split.canary(pod["uid"], pod["namespace"], pod["labels"]) else self
            )
        return self


WAIT = 0  # Answer.status of a request that waits for the snapshot (never sent)
OFFLOAD_STATUS = 1  # Answer.status of a body too much work for the listener's loop (never sent)


@dataclass(slots=True)
class Answer:
    """What the HTTP layer sends: status, JSON body bytes and the policy header; or WAIT with
    what the snapshot lacks (`behind`)."""

    status: int
    body: bytes
    policy: str = "none"
    behind: Behind | None = None


class Extender:
    """filter / prioritize / preempt / bind. `policies()` and `snapshot()` return current state.

    `record` receives a decision as a dict, or as a callable building it (decisions of filter
    and prioritize: cheap to hand over, built later by the buffer's reader); `sample()` says
    whether to record the next filter/prioritize decision at all.
    """

    def __init__(
        self,
        *,
        policies: Callable[[], dict[str, ServedPolicy]],
        snapshot: Callable[[], Any],
        metrics: Metrics,
        record: Callable[[dict[str, Any] | Callable[[], dict[str, Any]]], None] | None = None,
        binder: Callable[[protocol.BindingArgs], str] | None = None,
        rejected: Callable[[dict[str, Any]], None] | None = None,
        sample: Callable[[], bool] | None = None,
        bind_excluded: Iterable[str] | None = None,
        inline_limits: protocol.Limits | None = None,
        catch_up: CatchUp | None = None,
        shadow_governor: ShadowGovernor | None = None,
        shadow_slice: float | None = None,
        shadow_details: Callable[[], bool] | None = None,
        shadow_listed: Callable[[], bool] | None = None,
    ) -> None:
        self._policies = policies
        # Waits for a lagging snapshot: only with an Attempt, from callers that can wait.
        self.catch_up = catch_up or CatchUp(seconds=0)
        # The last filter that waited: (pod uid, its record), for prioritize's decision record.
        self._waited: tuple[str, dict[str, Any]] | None = None
        self._snapshot = snapshot
        self.metrics = metrics
        self._record = record or (lambda decision: None)
        self._sample = sample or (lambda: True)
        self._binder = binder
        self._rejected = rejected or (lambda entry: None)
        if bind_excluded is None:
            from django.conf import settings

            bind_excluded = settings.SCHEDWEB_EXTENDER_BIND_EXCLUDED_NAMESPACES
        self._bind_excluded = frozenset(bind_excluded)
        if inline_limits is None:
            from django.conf import settings

            inline_limits = protocol.Limits(
                objects=settings.SCHEDWEB_EXTENDER_INLINE_NODES,
                names=settings.SCHEDWEB_EXTENDER_INLINE_NAMES,
            )
        self.inline_limits = inline_limits
        self._pods = PodCache()
        self.shared = SharedEvaluations()
        self.windows = Windows()
        # The last filter body and what it parsed to: kube-scheduler's prioritize for the same
        # pod usually sends the very same bytes (the same Pod, every name passed), and
        # parsing 500 names again was a tenth of the pair's time (issue 13).
        self._last_parsed: tuple[bytes, protocol.ExtenderArgs] | None = None
        self._replaced: list[Any] = []  # freed by after_answer, as SharedEvaluations.evicted
        # Prioritize's answer for the evaluation filter just made, built after filter's answer
        # is written (while kube-scheduler runs its own score plugins): (evaluation, body).
        self._scores_ahead: tuple[Any, bytes] | None = None
        self._ahead: Any = None  # the evaluation whose body after_answer is to build
        # The canary's counts for its guard (issue 25): flushed by the runtime.
        self.canary_counts = CanaryCounts()
        # The shadow (issue 25): filter leaves a job, after_answer judges it, bounded.
        self.shadows = Shadows(
            metrics=metrics,
            record=self._record,
            decision=decision_record,
            governor=shadow_governor,
            slice_seconds=shadow_slice,
            details=shadow_details,
            listed=shadow_listed,
        )

    def after_answer(self, forward: Callable[[bytes], bool] | None = None) -> None:
        """Work that need not delay the answer, done once it is written (issue 13): freeing
        what the answer replaced (an earlier parse, evicted evaluations), and after a filter,
        prioritize's answer for the nodes that passed. Callers that never call it lose
        nothing: the lists are bounded and prioritize builds its answer itself. `forward`: the
        shadow's job goes to a worker process (Shadows.run)."""
        self._replaced.clear()
        self.shared.evicted.clear()
        self.shadows.run(forward)
        evaluation, self._ahead = self._ahead, None
        if evaluation is not None:
            try:
                body = protocol.host_priority_list(zip(evaluation.node_names, evaluation.extender))
            except Exception:  # prioritize builds it then, and logs what fails
                return
            self._scores_ahead = (evaluation, body)

    # -- helpers -------------------------------------------------------------------------------

    def _served(self, pod: dict[str, Any]) -> ServedPolicy | None:
        """The version judging the pod: its schedulerName's, or that one's canary (issue 25);
        every answering path (direct, ASGI, the offload pool's processes, after a catch-up
        wait, prioritize's reuse of filter's evaluation, whose key holds the version) comes
        through here."""
        served = self._policies().get(protocol.scheduler_name(pod))
        return served.judging(pod) if served is not None else None

    def _pod_view(self, args: protocol.ExtenderArgs | protocol.PreemptionArgs) -> PodView:
        """The engine's view of the request's pod; a ProtocolError naming the field when the
        pod cannot be converted (a 400, as for any other malformed field)."""
        try:
            return self._pods.view(args.pod, pod_key(args))
        except ConversionError as exc:
            raise protocol.ProtocolError(f"Pod: {exc}") from None

    def _bad_request(self, verb: str, started: float, exc: Exception) -> Answer:
        return self._observe(
            verb, started, Answer(400, protocol.error_body(str(exc))), None, "bad_request"
        )

    def _nodes(self, args: protocol.ExtenderArgs, state: Any) -> tuple[list[NodeView], list[str]]:
        """Views of the candidate nodes, and the names schedweb's snapshot does not know."""
        known: list[NodeView] = []
        unknown: list[str] = []
        lookup = state.node if state is not None else (lambda name: None)
        if args.nodes is None:
            if state is not None:
                # Every name known (the usual case): a window seen before (windows.py), or one
                # C-level pass over the snapshot's index. Shared: not to be modified.
                views = self.windows.views(args.node_names, state)
                if views is not None:
                    return views, unknown
            for name in args.node_names:
                view = lookup(name)
                if view is None:
                    unknown.append(name)
                else:
                    known.append(view)
            return known, unknown
        for obj in args.nodes:
            name = obj["metadata"]["name"]
            view = lookup(name)
            if view is None:
                # Not watched yet (a brand-new node): judge it from the object the scheduler
                # sent, with nothing requested on it as far as we know.
                try:
                    view = node_view(obj, requested=ResourceMap(), pod_count=0)
                except ConversionError:
                    unknown.append(name)
                    continue
            known.append(view)
        return known, unknown

    def _observe(
        self,
        verb: str,
        started: float,
        answer: Answer,
        served: ServedPolicy | None,
        error: str = "",
    ) -> Answer:
        self.metrics.observe(
            verb=verb,
            code=answer.status,
            seconds=time.perf_counter() - started,
            policy=served.name if served else "",
            version=served.version if served else 0,
            error=error,
        )
        return answer

    # -- verbs -----------------------------------------------------------------------------------

    def filter(
        self, body: bytes, attempt: Attempt | None = None, *, inline: bool = False
    ) -> Answer:
        """`attempt`: the caller can wait for the snapshot (a WAIT answer is then possible).
        `inline` (the listener's event loop): OFFLOAD for a body with more items than
        `inline_limits`, before they are checked (before any WAIT); a worker process answers it."""
        started = time.perf_counter()
        try:
            args = protocol.parse_extender_args(body, self.inline_limits if inline else None)
        except protocol.TooMuchWork:
            return OFFLOAD
        except protocol.ProtocolError as exc:
            return self._observe(
                "filter", started, Answer(400, protocol.error_body(str(exc))), None, "bad_request"
            )
        if len(self._replaced) > 4:
            self._replaced.clear()
        self._replaced.append(self._last_parsed)
        self._last_parsed = (body, args)  # args are never modified after parsing
        served = self._served(args.pod)
        if served is None:
            answer = Answer(
                200,
                protocol.filter_result(
                    passed=args.node_names, failed={}, unresolvable={}, nodes=args.nodes
                ),
            )
            return self._observe("filter", started, answer, None)
        try:
            pod = self._pod_view(args)
        except protocol.ProtocolError as exc:
            return self._bad_request("filter", started, exc)
        try:
            answer, decision = self._filter(args, served, pod, attempt)
        except Exception:  # never a 500: the policy's failurePolicy decides
            log.exception("extender filter failed for policy %s", served.label)
            answer = self._filter_failure(args, served)
            if served.arm:  # an error of the version that judged, for the canary's guard
                self.canary_counts.count(served, rejected=False, errors=True)
            return self._observe("filter", started, answer, served, "internal")
        if answer.status == WAIT:
            return answer  # answered once the snapshot caught up (or the wait ran out)
        if decision is not None:
            self._record(decision)
        return self._observe("filter", started, answer, served)

    def _behind(
        self,
        attempt: Attempt | None,
        snapshot: Any,
        state: Any,
        unknown: list[str],
        names: list[str] | None,
        pod: PodView,
        served: ServedPolicy,
    ) -> Behind | None:
        """What the snapshot lacks that the request needs, when the caller can wait for it;
        a WAIT answer follows when it may (catch_up.CatchUp.may_wait)."""
        if attempt is None:
            return None
        behind = behind_of(
            state=state,
            unknown=unknown,
            names=names,
            pod=pod,
            reads_pods=served.reads_pods,
            version=snapshot.version if snapshot is not None else 0,
        )
        if behind is not None and self.catch_up.may_wait(attempt, snapshot, behind):
            return behind
        self.catch_up.finished(attempt, behind)
        return None

    def _filter(
        self,
        args: protocol.ExtenderArgs,
        served: ServedPolicy,
        pod: PodView,
        attempt: Attempt | None = None,
    ) -> tuple[Answer, Callable[[], dict] | None]:
        snapshot = self._snapshot()
        state = snapshot.state if snapshot is not None else None
        known, unknown = self._nodes(args, state)
        behind = self._behind(attempt, snapshot, state, unknown, args.node_names, pod, served)
        if behind is not None:
            return Answer(WAIT, b"", served.label, behind), None
        waited = attempt.record() if attempt is not None else None
        self._waited = (pod["uid"], waited) if waited is not None else None
        policy = served.compiled
        # Cache-capable requests only: with full Node objects, a node the snapshot lacks is
        # judged from the object sent, which the names alone do not identify.
        key = (
            self.shared.key(pod_key(args), served, args.node_names) if args.nodes is None else None
        )
        version = snapshot.version if snapshot is not None else -1
        exact = known if not unknown else None  # the views in the names' order
        evaluation = self.shared.get(key, args.node_names, policy, state, version, lambda: exact)
        if evaluation is None:
            # With scores when prioritize may reuse it (a cacheable request): one evaluation
            # per pod instead of a filters-only one here and a full one in prioritize.
            evaluation = policy.evaluate(
                pod,
                known,
                state,
                scores=key is not None,
                memo=True,
                # every name known, views in their order: no view read for its name
                names=(
                    self.windows.kept_names(args.node_names)
                    if args.nodes is None and not unknown
                    else None
                ),
            )
        passed: list[str] = []
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        if all(evaluation.passed):
            passed = list(evaluation.node_names)  # the usual case, without a Python loop
        else:
            passed = list(compress(evaluation.node_names, evaluation.passed))
            for i in [i for i, ok in enumerate(evaluation.passed) if not ok]:
                name = evaluation.node_names[i]
                reason = f"{evaluation.failed_rule[i]}: {evaluation.messages[i]}"
                if evaluation.unresolvable[i]:
                    unresolvable[name] = reason
                else:
                    failed[name] = reason
        fail_closed = policy.spec.failure_policy == "Fail"
        for name in unknown:
            if fail_closed:
                failed[name] = "schedweb has no data for this node yet (failurePolicy Fail)"
            else:
                passed.append(name)
        if key is not None:
            self.shared.put(key, args.node_names, policy, state, evaluation, version, exact)
            if len(passed) == len(evaluation.node_names) and evaluation.scored:
                self._ahead = evaluation  # every node passed: prioritize asks about them all
            if len(passed) != len(args.node_names):
                # What prioritize will be asked about: the names that passed.
                self.shared.put(
                    self.shared.key(pod_key(args), served, passed),
                    passed,
                    policy,
                    state,
                    evaluation,
                    version,
                    list(compress(exact, evaluation.passed)) if exact is not None else None,
                )
        answer = Answer(
            200,
            protocol.filter_result(
                passed=passed, failed=failed, unresolvable=unresolvable, nodes=args.nodes
            ),
            served.label,
        )
        if served.arm:  # during a canary: counted for its guard
            rejected = evaluation.applies and not passed
            errors = bool(evaluation.errors)
            self.canary_counts.count(served, rejected=rejected, errors=errors)
            outcome = "error" if errors else "rejected" if rejected else "passed"
            self.metrics.count("canary_judged", served.arm, outcome)
        if served.shadow is not None:  # judged once this answer is written (after_answer)
            body = self._last_parsed[0] if self._last_parsed is not None else None
            self.shadows.leave(
                ShadowJob(served, served.shadow, pod, known, state, evaluation, time.time(), body)
            )
        decision = None
        if evaluation.applies and (len(passed) <= 1 or waited) and self._sample():
            # No prioritize call follows when at most one node is left (protocol section 3.0);
            # a request that waited for the snapshot is recorded as it was answered.
            decision = partial(
                decision_record, pod, served, "filter", evaluation, time.time(), waited
            )
        if evaluation.applies and not passed and pod["uid"]:
            # Rejected everywhere: kube-scheduler may not retry it for minutes (policies/requeue.py).
            self._rejected(
                {
                    "uid": pod["uid"],
                    "namespace": pod["namespace"],
                    "name": pod["name"],
                    "policy": served.name,
                    "at": time.time(),
                }
            )
        return answer, decision

    def shadow(self, body: bytes) -> Answer:
        """A filter body another process answered, judged here by the shadow beside the active
        version (a worker of the offload pool: Shadows.forward, policies/extender/shadow.py):
        both evaluated on this process's snapshot, so that they are compared on one state;
        counted and recorded as the listener would. Changes no answer, counts nothing for a
        canary's guard, records no decision of the active version's; 200 with an empty body,
        400 for a body that is not a filter's."""
        try:
            args = protocol.parse_extender_args(body, None)
            served = self._served(args.pod)
            if served is None or served.shadow is None:
                return Answer(200, b"")  # no shadow (any more): nothing to judge
            pod = self._pod_view(args)
        except protocol.ProtocolError as exc:
            return Answer(400, protocol.error_body(str(exc)))
        snapshot = self._snapshot()
        state = snapshot.state if snapshot is not None else None
        known, _unknown = self._nodes(args, state)
        try:
            evaluation = served.compiled.evaluate(pod, known, state, memo=True)
        except Exception:  # the active version's failure was the listener's answer to give
            log.exception("the active version failed on a forwarded shadow body")
            return Answer(200, b"")
        self.shadows.judge(
            ShadowJob(served, served.shadow, pod, known, state, evaluation, time.time())
        )
        return Answer(200, b"", served.shadow.label)

    def _filter_failure(self, args: protocol.ExtenderArgs, served: ServedPolicy) -> Answer:
        if served.compiled.spec.failure_policy == "Fail":
            # Fail closed: the scheduler records a SchedulerError and retries the pod with backoff.
            # The exception's text stays in the log: callers learn nothing of schedweb's insides.
            body = protocol.filter_result(
                passed=[],
                failed={},
                unresolvable={},
                nodes=args.nodes,
                error="schedweb internal error (details in schedweb's log)",
            )
        else:
            body = protocol.filter_result(
                passed=args.node_names, failed={}, unresolvable={}, nodes=args.nodes
            )
        return Answer(200, body, served.label)

    def prioritize(
        self, body: bytes, attempt: Attempt | None = None, *, inline: bool = False
    ) -> Answer:
        """`attempt` and `inline`: as filter's."""
        started = time.perf_counter()
        try:
            last = self._last_parsed
            if last is not None and last[0] == body:  # equal bytes, compared in full
                args = last[1]
            else:
                args = protocol.parse_extender_args(body, self.inline_limits if inline else None)
        except protocol.TooMuchWork:
            return OFFLOAD
        except protocol.ProtocolError as exc:
            return self._observe(
                "prioritize",
                started,
                Answer(400, protocol.error_body(str(exc))),
                None,
                "bad_request",
            )
        served = self._served(args.pod)
        if served is None:
            return self._observe("prioritize", started, Answer(200, b"[]"), None)
        try:
            pod = self._pod_view(args)
        except protocol.ProtocolError as exc:
            return self._bad_request("prioritize", started, exc)
        try:
            snapshot = self._snapshot()
            state = snapshot.state if snapshot is not None else None
            key = (
                self.shared.key(pod_key(args), served, args.node_names)
                if args.nodes is None
                else None
            )
            version = snapshot.version if snapshot is not None else -1
            looked: list[tuple[list[NodeView], list[str]]] = []

            def views() -> list[NodeView] | None:
                looked.append(self._nodes(args, state))
                return looked[0][0] if not looked[0][1] else None

            evaluation = self.shared.get(
                key, args.node_names, served.compiled, state, version, views
            )
            if evaluation is None or not evaluation.scored:
                known, unknown = looked[0] if looked else self._nodes(args, state)
                behind = self._behind(
                    attempt, snapshot, state, unknown, args.node_names, pod, served
                )
                if behind is not None:
                    return Answer(WAIT, b"", served.label, behind)
                evaluation = served.compiled.evaluate(pod, known, state, memo=True)
                self.shared.put(
                    key,
                    args.node_names,
                    served.compiled,
                    state,
                    evaluation,
                    version,
                    known if not unknown else None,
                )
            if evaluation.node_names == args.node_names:
                # Every name known, in order (the usual case): the columns as they are, often
                # encoded already after filter's answer went out.
                ahead = self._scores_ahead
                if ahead is not None and ahead[0] is evaluation:
                    body_out = ahead[1]
                else:
                    body_out = protocol.host_priority_list(
                        zip(args.node_names, evaluation.extender)
                    )
            else:
                scores = dict(zip(evaluation.node_names, evaluation.extender))
                body_out = protocol.host_priority_list(
                    (name, scores.get(name, 0)) for name in args.node_names
                )
        except Exception:  # prioritize errors mean "no opinion": an empty list
            log.exception("extender prioritize failed for policy %s", served.label)
            return self._observe(
                "prioritize", started, Answer(200, b"[]", served.label), served, "internal"
            )
        if evaluation.applies and self._sample():
            # Deferred: the record (about a millisecond for 500 nodes) is built off the request
            # path, by whoever drains the buffer; the evaluation's columns are not mutated later.
            waited = attempt.record() if attempt is not None else None
            if waited is None and self._waited is not None and self._waited[0] == pod["uid"]:
                waited = self._waited[1]  # its filter waited for the snapshot
            self._record(
                partial(decision_record, pod, served, "prioritize", evaluation, time.time(), waited)
            )
        return self._observe("prioritize", started, Answer(200, body_out, served.label), served)

    def preempt(self, body: bytes, *, inline: bool = False) -> Answer:
        """Keeps the scheduler's candidates, minus nodes a policy filter says can never fit.
        `inline`: as filter's."""
        started = time.perf_counter()
        try:
            args = protocol.parse_preemption_args(body, self.inline_limits if inline else None)
        except protocol.TooMuchWork:
            return OFFLOAD
        except protocol.ProtocolError as exc:
            return self._observe(
                "preempt", started, Answer(400, protocol.error_body(str(exc))), None, "bad_request"
            )
        served = self._served(args.pod)
        if served is None or not args.victims:
            return self._observe(
                "preempt", started, Answer(200, protocol.preemption_result(args.victims)), served
            )
        try:
            pod = self._pod_view(args)
        except protocol.ProtocolError as exc:
            return self._bad_request("preempt", started, exc)
        try:
            snapshot = self._snapshot()
            state = snapshot.state if snapshot is not None else None
            nodes = [
                n
                for n in (state.node(name) if state else None for name in args.victims)
                if n is not None
            ]
            evaluation = served.compiled.evaluate(pod, nodes, state, scores=False)
            never = {
                name
                for name, ok, hard in zip(
                    evaluation.node_names, evaluation.passed, evaluation.unresolvable
                )
                if not ok and hard
            }
            kept = {name: victims for name, victims in args.victims.items() if name not in never}
        except Exception:
            log.exception("extender preempt failed for policy %s", served.label)
            kept, error = args.victims, "internal"
        else:
            error = ""
        return self._observe(
            "preempt",
            started,
            Answer(200, protocol.preemption_result(kept), served.label),
            served,
            error,
        )

    def bind(
        self, body: bytes, *, inline: bool = False, lock: AbstractContextManager | None = None
    ) -> Answer:
        """Binds a pod schedweb is responsible for, when binding is enabled (a binder is set).

        Only a pod the snapshot holds under PodUID, with that namespace and name, outside the
        namespaces the installation excludes, whose schedulerName an active policy targets, to
        a node the snapshot holds that kube-scheduler could have chosen: the pod tolerates its
        NoSchedule and NoExecute taints, the node is schedulable and matches the pod's
        nodeName, nodeSelector and required node affinity, and the policy's filters pass it
        (`_bind_refusal`). A caller cannot place other schedulers' pods, invent nodes, or put a
        pod where scheduling would not. Every refusal is the same answer, headers included, so
        the caller learns nothing about which pods, nodes or policies exist (the reason is
        logged). Idempotent: a pod already on that node is reported bound (kube-scheduler
        retries binds whose answer it lost). `lock` (the runtime's serve lock) is held while
        the snapshot is read and the checks run, not during the call to the API server.
        """
        started = time.perf_counter()
        try:
            args = protocol.parse_binding_args(body)
        except protocol.ProtocolError as exc:
            return self._bad_request("bind", started, exc)
        if self._binder is None:
            answer = Answer(200, protocol.binding_result("schedweb does not bind pods here"))
            return self._observe("bind", started, answer, None, "bind_disabled")
        with lock or nullcontext():
            snapshot = self._snapshot()
            state = snapshot.state if snapshot is not None else None
            pod = state.pod(args.pod_uid) if state is not None else None
            served = self._policies().get(pod["schedulerName"]) if pod is not None else None
            served = served.judging_view(pod) if served is not None else None
            try:
                reason = self._bind_refusal(args, pod, served, state)
            except Exception as exc:  # a policy that fails here refuses, as a check would
                log.exception(
                    "extender bind check failed for %s/%s", args.pod_namespace, args.pod_name
                )
                reason = f"the checks failed: {type(exc).__name__}"
            bound_to = pod["nodeName"] if pod is not None else ""
        if reason:
            log.warning(
                "extender bind of %s/%s (uid %s) to %s refused: %s",
                args.pod_namespace,
                args.pod_name,
                args.pod_uid,
                args.node,
                reason,
            )
            # No policy: the answer (its X-Schedweb-Policy header included) and the counters
            # /metrics shows must not say whether the uid belongs to a targeted pod.
            answer = Answer(200, protocol.binding_result(BIND_REFUSED))
            return self._observe("bind", started, answer, None, "bind_refused")
        error = ""
        if not bound_to:
            try:
                failure = self._binder(args)
            except Exception:
                log.exception("extender bind failed for %s/%s", args.pod_namespace, args.pod_name)
                failure = "exception"
            if failure:
                log.warning(
                    "extender bind of %s/%s to %s failed: %s",
                    args.pod_namespace,
                    args.pod_name,
                    args.node,
                    failure,
                )
                error = BIND_FAILED
        if not error:
            self._record(
                {"kind": "chosen", "podUid": args.pod_uid, "node": args.node, "at": time.time()}
            )
        return self._observe(
            "bind",
            started,
            Answer(200, protocol.binding_result(error), served.label),
            served,
            "bind_failed" if error else "",
        )

    def _bind_refusal(
        self,
        args: protocol.BindingArgs,
        pod: PodView | None,
        served: ServedPolicy | None,
        state: Any,
    ) -> str:
        """Why this binding is refused, in words for the log; "" when it may be made."""
        if pod is None:
            return "no pod with this uid in the snapshot"
        if (pod["namespace"], pod["name"]) != (args.pod_namespace, args.pod_name):
            return "the uid belongs to another pod"
        if pod["namespace"] in self._bind_excluded:
            return f"namespace {pod['namespace']} is excluded from binding"
        if served is None:
            return f"no active policy targets schedulerName {pod['schedulerName']}"
        node = state.node(args.node)
        if node is None:
            return "no such node in the snapshot"
        if pod["nodeName"]:
            # Already bound: there, a retried bind is answered as done; elsewhere, refused.
            return "" if pod["nodeName"] == args.node else "the pod is already bound elsewhere"
        for check in (filter_node_name, filter_node_unschedulable, filter_taints):
            if check(pod, node):
                return (
                    f"kube-scheduler's {check.__name__.removeprefix('filter_')} filter rejects it"
                )
        if not node_affinity_matches(pod, node):
            return "the pod's nodeSelector or required node affinity does not match the node"
        evaluation = served.compiled.evaluate(pod, [node], state, scores=False)
        if not evaluation.passed[0]:
            return f"policy {served.label} rejects the node ({evaluation.failed_rule[0]})"
        return ""


# Not answered: the body is too much work for the listener's event loop (entry.OFFLOAD).
OFFLOAD = Answer(OFFLOAD_STATUS, b"", "")

# What a caller of bind learns: refused (any check) or failed (the API server said no).
BIND_REFUSED = "schedweb refused this binding"
BIND_FAILED = "schedweb could not bind the pod; see schedweb's log"
