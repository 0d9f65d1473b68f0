"""The extender's verbs over in-memory state: active policies and the cluster snapshot.

No database, Kubernetes or task round trip happens here (bind excepted: creating the binding is
the verb's job). Every answer is protocol-exact; nothing raises to the caller except
ProtocolError for a malformed body (HTTP 400).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from policies.cluster.convert import ConversionError, node_view, pod_view
from policies.engine.inputs import NodeView, PodView, ResourceMap
from policies.engine.policy import CompiledPolicy

from . import protocol
from .metrics import Metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ServedPolicy:
    """An active policy version as an extender serves it."""

    name: str
    version: int
    compiled: CompiledPolicy

    @property
    def label(self) -> str:
        return f"{self.name}/v{self.version}"


@dataclass(slots=True)
class Answer:
    """What the HTTP layer sends: status, JSON body bytes and the policy header."""

    status: int
    body: bytes
    policy: str = "none"


class _PodCache:
    """The last few converted pods: filter and prioritize for one pod come back to back."""

    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._items: dict[tuple[str, str, str], PodView] = {}

    def view(self, obj: dict[str, Any]) -> PodView:
        meta = obj.get("metadata") or {}
        key = (meta.get("uid") or "", meta.get("resourceVersion") or "", meta.get("name") or "")
        if key[0] and key[1]:
            hit = self._items.get(key)
            if hit is not None:
                return hit
        view = pod_view(obj)
        if key[0] and key[1]:
            if len(self._items) >= self._size:
                self._items.pop(next(iter(self._items)))
            self._items[key] = view
        return view


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
    ) -> None:
        self._policies = policies
        self._snapshot = snapshot
        self.metrics = metrics
        self._record = record or (lambda decision: None)
        self._sample = sample or (lambda: True)
        self._binder = binder
        self._rejected = rejected or (lambda entry: None)
        self._pods = _PodCache()

    # -- helpers -------------------------------------------------------------------------------

    def _served(self, pod: dict[str, Any]) -> ServedPolicy | None:
        name = (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
        return self._policies().get(name)

    def _nodes(self, args: protocol.ExtenderArgs, state: Any) -> tuple[list[NodeView], list[str]]:
        """Views of the candidate nodes, and the names schedweb's snapshot does not know."""
        known: list[NodeView] = []
        unknown: list[str] = []
        lookup = state.node if state is not None else (lambda name: None)
        if args.nodes is None:
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

    def filter(self, body: bytes) -> Answer:
        started = time.perf_counter()
        try:
            args = protocol.parse_extender_args(body)
        except protocol.ProtocolError as exc:
            return self._observe(
                "filter", started, Answer(400, protocol.error_body(str(exc))), None, "bad_request"
            )
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
            answer, decision = self._filter(args, served)
        except Exception as exc:  # never a 500: the policy's failurePolicy decides
            log.exception("extender filter failed for policy %s", served.label)
            answer = self._filter_failure(args, served, exc)
            return self._observe("filter", started, answer, served, "internal")
        if decision is not None:
            self._record(decision)
        return self._observe("filter", started, answer, served)

    def _filter(
        self, args: protocol.ExtenderArgs, served: ServedPolicy
    ) -> tuple[Answer, Callable[[], dict] | None]:
        snapshot = self._snapshot()
        state = snapshot.state if snapshot is not None else None
        pod = self._pods.view(args.pod)
        known, unknown = self._nodes(args, state)
        policy = served.compiled
        evaluation = policy.evaluate(pod, known, state, scores=False)
        passed: list[str] = []
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        for name, ok, rule, message, hard in zip(
            evaluation.node_names,
            evaluation.passed,
            evaluation.failed_rule,
            evaluation.messages,
            evaluation.unresolvable,
        ):
            if ok:
                passed.append(name)
            elif hard:
                unresolvable[name] = f"{rule}: {message}"
            else:
                failed[name] = f"{rule}: {message}"
        fail_closed = policy.spec.failure_policy == "Fail"
        for name in unknown:
            if fail_closed:
                failed[name] = "schedweb has no data for this node yet (failurePolicy Fail)"
            else:
                passed.append(name)
        answer = Answer(
            200,
            protocol.filter_result(
                passed=passed, failed=failed, unresolvable=unresolvable, nodes=args.nodes
            ),
            served.label,
        )
        decision = None
        if evaluation.applies and len(passed) <= 1 and self._sample():
            # No prioritize call follows when at most one node is left (protocol section 3.0).
            decision = partial(_decision, pod, served, "filter", evaluation, time.time())
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

    def _filter_failure(
        self, args: protocol.ExtenderArgs, served: ServedPolicy, exc: Exception
    ) -> Answer:
        if served.compiled.spec.failure_policy == "Fail":
            # Fail closed: the scheduler records a SchedulerError and retries the pod with backoff.
            body = protocol.filter_result(
                passed=[],
                failed={},
                unresolvable={},
                nodes=args.nodes,
                error=f"schedweb internal error: {exc}",
            )
        else:
            body = protocol.filter_result(
                passed=args.node_names, failed={}, unresolvable={}, nodes=args.nodes
            )
        return Answer(200, body, served.label)

    def prioritize(self, body: bytes) -> Answer:
        started = time.perf_counter()
        try:
            args = protocol.parse_extender_args(body)
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
            snapshot = self._snapshot()
            state = snapshot.state if snapshot is not None else None
            pod = self._pods.view(args.pod)
            known, _unknown = self._nodes(args, state)
            evaluation = served.compiled.evaluate(pod, known, state)
            scores = dict(zip(evaluation.node_names, evaluation.extender))
            body_out = protocol.host_priority_list(
                [(name, scores.get(name, 0)) for name in args.node_names]
            )
        except Exception:  # prioritize errors mean "no opinion": an empty list
            log.exception("extender prioritize failed for policy %s", served.label)
            return self._observe(
                "prioritize", started, Answer(200, b"[]", served.label), served, "internal"
            )
        if evaluation.applies and self._sample():
            # Deferred: the record (about a millisecond for 500 nodes) is built off the request
            # path, by whoever drains the buffer; the evaluation's columns are not mutated later.
            self._record(partial(_decision, pod, served, "prioritize", evaluation, time.time()))
        return self._observe("prioritize", started, Answer(200, body_out, served.label), served)

    def preempt(self, body: bytes) -> Answer:
        """Keeps the scheduler's candidates, minus nodes a policy filter says can never fit."""
        started = time.perf_counter()
        try:
            args = protocol.parse_preemption_args(body)
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
            snapshot = self._snapshot()
            state = snapshot.state if snapshot is not None else None
            pod = self._pods.view(args.pod)
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

    def bind(self, body: bytes) -> Answer:
        started = time.perf_counter()
        try:
            args = protocol.parse_binding_args(body)
        except protocol.ProtocolError as exc:
            return self._observe(
                "bind", started, Answer(400, protocol.error_body(str(exc))), None, "bad_request"
            )
        if self._binder is None:
            answer = Answer(
                200,
                protocol.binding_result(
                    "schedweb has no Kubernetes client configured to bind pods"
                ),
            )
            return self._observe("bind", started, answer, None, "no_binder")
        try:
            error = self._binder(args)
        except Exception as exc:
            log.exception("extender bind failed for %s/%s", args.pod_namespace, args.pod_name)
            error = f"schedweb could not bind the pod: {exc}"
        if not error:
            self._record(
                {"kind": "chosen", "podUid": args.pod_uid, "node": args.node, "at": time.time()}
            )
        return self._observe(
            "bind",
            started,
            Answer(200, protocol.binding_result(error)),
            None,
            "bind_failed" if error else "",
        )


def _decision(
    pod: PodView, served: ServedPolicy, verb: str, evaluation, at: float | None = None
) -> dict[str, Any]:
    """A compact record of one decision, built from the columns (no per-node objects)."""
    nodes = []
    scored = evaluation.scored
    for i, name in enumerate(evaluation.node_names):
        entry: dict[str, Any] = {"n": name, "ok": evaluation.passed[i]}
        if not evaluation.passed[i]:
            entry["rule"] = evaluation.failed_rule[i]
            entry["msg"] = evaluation.messages[i]
        elif scored:
            entry["raw"] = [col[i] for col in evaluation.raw]
            entry["norm"] = [round(col[i], 3) for col in evaluation.normalized]
            entry["total"] = round(evaluation.total[i], 3)
            entry["ext"] = evaluation.extender[i]
        errors = evaluation.errors.get(i)
        if errors:
            entry["errors"] = [e.to_dict() for e in errors]
        nodes.append(entry)
    return {
        "kind": "decision",
        "at": time.time() if at is None else at,
        "pod": {"namespace": pod["namespace"], "name": pod["name"], "uid": pod["uid"]},
        "policy": served.name,
        "version": served.version,
        "verb": verb,
        "scores": evaluation.score_names if scored else [],
        "weights": evaluation.weights if scored else [],
        "nodes": nodes,
        # the evaluation's own winners: totals above are rounded, and would show false ties
        "winners": evaluation.winners(),
    }
