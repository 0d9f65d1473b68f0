"""Compiling a policy document and evaluating it for a pod over candidate nodes.

A policy's expressions are type-checked one by one, then fused into ONE generated Python function
that loops over the nodes (the fast path): variables are computed just before their first use,
filters in order, scores for the nodes that pass. Any exception on a node - a CEL error, or a
construct the fast path does not try to get exactly right such as error absorption in `||` -
sends that node to the exact path (`Program.evaluate`, full CEL semantics, lazy variables),
which decides. Both paths are checked against each other and against cel-expr-python in tests.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .cel import (
    CelCompileError,
    CelError,
    CelEvalError,
    compile_expression,
    policy_env,
    queue_env,
    types,
)
from .cel.deadline import EvaluationTimeout, deadline_check
from .cel.plain import plain_message
from .document import (
    FieldError,
    ParsedDocument,
    PolicyInvalid,
    PolicySpec,
    check_values,
    is_variable_name,
    locate,
    parse_text,
)
from .fastpath import FastPath
from .helpers import ClusterFunctions
from .inputs import ClusterView, NodeView, PodView
from .positions import document_position
from .printable import printable
from .queue import GangMembership, QueueKey, clamp, namespace_view
from .results import Evaluation, RuleError
from .rule import MESSAGE_LATER, CompiledRule, LazyVariables, cel_type_name
from .spec_build import build_spec

DEFAULT_COST_LIMIT = 1_000_000
# The sum of the estimates of all a policy's expressions (a node may run every one of them).
DEFAULT_POLICY_COST_LIMIT = 10_000_000
# A filter message goes to kube-scheduler for every rejected node: at most this many characters.
MAX_MESSAGE_CHARS = 1024
_BOOL = (types.BOOL,)
_NUMBER = (types.INT, types.DOUBLE)
_STRING = (types.STRING,)


def compile_policy(
    source: str | Mapping[str, Any] | ParsedDocument,
    *,
    cost_limit: int = DEFAULT_COST_LIMIT,
    policy_cost_limit: int = DEFAULT_POLICY_COST_LIMIT,
    track_cost: bool = True,
) -> CompiledPolicy:
    """Validates and compiles a policy; raises PolicyInvalid listing every error found."""
    parsed = parse_text(source) if isinstance(source, str) else source
    if not isinstance(parsed, ParsedDocument):
        parsed = ParsedDocument(data=source)
    value_errors = check_values(parsed.data)
    if value_errors:
        raise PolicyInvalid(
            [
                FieldError(e.path, e.message, doc_line=pos[0], doc_column=pos[1])
                for e in value_errors
                for pos in [locate(parsed.positions, e.path, None, None)]
            ],
            parsed.warnings,
        )
    spec, errors = build_spec(parsed.data, parsed.positions)
    if spec is None:
        raise PolicyInvalid(errors, parsed.warnings)
    return CompiledPolicy(
        spec,
        parsed,
        cost_limit=cost_limit,
        policy_cost_limit=policy_cost_limit,
        structural_errors=errors,
        track_cost=track_cost,
    )


def validate_policy(
    source: str | Mapping[str, Any], *, cost_limit: int = DEFAULT_COST_LIMIT
) -> list[FieldError]:
    """Every error of a document, or [] when it compiles. No side effects."""
    try:
        compile_policy(source, cost_limit=cost_limit)
    except PolicyInvalid as exc:
        return exc.errors
    return []


class CompiledPolicy:
    """A checked policy, ready to evaluate; immutable and shareable between threads."""

    def __init__(
        self,
        spec: PolicySpec,
        parsed: ParsedDocument,
        *,
        cost_limit: int,
        policy_cost_limit: int = DEFAULT_POLICY_COST_LIMIT,
        structural_errors: list[FieldError] = (),
        track_cost: bool = True,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.cost_limit = cost_limit
        self.policy_cost_limit = policy_cost_limit
        # Off only in the benchmark, to measure what the runtime cost tracker costs.
        self.track_cost = track_cost
        self._positions = parsed.positions
        self._parsed = parsed
        self._errors: list[FieldError] = list(structural_errors)
        self.variables: dict[str, CompiledRule] = {}
        self._compile_variables()
        env = policy_env(
            {name: rule.program.type for name, rule in self.variables.items()},
            bounds=self._variable_bounds(),
        )
        self.match_conditions = [
            self._compile(r.name, f"matchConditions[{i}].expression", r.expression, env, _BOOL)
            for i, r in enumerate(spec.match_conditions)
        ]
        self.filters = [
            self._compile(r.name, f"filters[{i}].expression", r.expression, env, _BOOL)
            for i, r in enumerate(spec.filters)
        ]
        self.messages = [
            self._compile(r.name, f"filters[{i}].message", r.message, env, _STRING)
            if r.message
            else None
            for i, r in enumerate(spec.filters)
        ]
        self.scores = [
            self._compile(r.name, f"scores[{i}].expression", r.expression, env, _NUMBER)
            for i, r in enumerate(spec.scores)
        ]
        self.queue = (
            self._compile(
                "queue", "queue.expression", spec.queue.expression, queue_env(), (types.INT,)
            )
            if spec.queue is not None
            else None
        )
        self.gang_group = self.gang_min_count = None
        if spec.gang is not None:
            self.gang_group = self._compile(
                "gang", "gang.group", spec.gang.group, queue_env(), _STRING
            )
            self.gang_min_count = self._compile(
                "gang", "gang.minCount", spec.gang.min_count, queue_env(), (types.INT,)
            )
        for i, rule in enumerate(self.match_conditions):
            if rule is not None and rule.program.references & (
                {"node"} | {f"variables.{v}" for v in self.variables}
            ):
                self._error(
                    f"matchConditions[{i}].expression",
                    "a matchCondition decides whether the policy applies to the pod, so it may use pod and cluster but not node or variables",
                    rule=rule.name,
                )
        self._check_total_cost()
        # YAML 1.1 readings that YAML 1.2 would not make (document.coercion_warnings)
        self.warnings: list[FieldError] = list(parsed.warnings)
        if self._errors:
            raise PolicyInvalid(self._errors, self.warnings)
        self.score_names = [r.name for r in spec.scores]
        self.weights = [r.weight for r in spec.scores]
        self.filter_names = [r.name for r in spec.filters]
        self._fast = FastPath(self)
        # Whether a node's results depend on the pod and that node's view alone (no expression
        # reads the cluster, no gang): then an evaluation stays exact for as long as its nodes'
        # views are the ones it read, whatever else the snapshot applied since
        # (policies/extender/shared.py reuses it across such moves).
        self.node_local = spec.gang is None and not any(
            "cluster" in rule.program.references
            for rule in (
                *self.variables.values(),
                *self.match_conditions,
                *self.filters,
                *self.messages,
                *self.scores,
            )
            if rule is not None
        )

    # -- compilation -------------------------------------------------------------------------

    def _check_total_cost(self) -> None:
        """Each expression fits its budget; together they must fit the policy's: the error
        points at the expression where the running total passes it."""
        rules = [
            *self.variables.values(),
            *self.match_conditions,
            *self.filters,
            *self.messages,
            *self.scores,
            self.queue,
            self.gang_group,
            self.gang_min_count,
        ]
        total = 0
        for rule in rules:
            if rule is None or isinstance(rule.program, _DynPlaceholder):
                continue
            total += rule.program.cost
            if total > self.policy_cost_limit:
                self._error(
                    rule.path,
                    f"the policy's estimated cost passes its budget {self.policy_cost_limit} "
                    f"here (total {total} so far, this expression {rule.program.cost})",
                    rule=rule.name,
                    kind="cost",
                    line=1,
                    column=1,
                )
                return

    def _error(
        self,
        path: str,
        message: str,
        *,
        rule: str | None,
        kind: str = "schema",
        line: int | None = None,
        column: int | None = None,
        cel_message: str | None = None,
    ) -> None:
        doc_line, doc_column = locate(self._positions, path, line, column)
        if line is not None and column is not None and self._parsed.lines:
            # inside a multi-line scalar: the exact place, as the editor's markers show it
            exact = document_position(
                lines=self._parsed.lines, parsed=self._parsed, path=path, line=line, column=column
            )
            if exact is not None:
                doc_line, doc_column = exact
        self._errors.append(
            FieldError(
                path,
                message,
                kind=kind,
                rule=rule,
                line=line,
                column=column,
                doc_line=doc_line,
                doc_column=doc_column,
                cel_message=cel_message,
            )
        )

    def _compile(self, name: str, path: str, source: str, env, expect) -> CompiledRule | None:
        if not source:  # missing or malformed: already reported by the structural check
            return None
        deadline_check()
        try:
            program = compile_expression(
                source, env, cost_limit=self.cost_limit, expect=expect, track_cost=self.track_cost
            )
        except CelCompileError as exc:
            for issue in exc.issues:
                plain = plain_message(issue.message) if issue.kind == "type" else None
                self._error(
                    path,
                    plain or issue.message,
                    rule=name,
                    kind=issue.kind,
                    line=issue.line,
                    column=issue.column,
                    cel_message=issue.message if plain else None,
                )
            return None
        return CompiledRule(
            name=name, path=path, program=program, node_dependent="node" in program.references
        )

    def _variable_bounds(self) -> dict:
        """Each compiled variable's size bound, carried into the expressions that read it (a
        variable that failed to compile is dyn, sized by its type)."""
        return {
            name: rule.program.bound
            for name, rule in self.variables.items()
            if not isinstance(rule.program, _DynPlaceholder)
        }

    def _compile_variables(self) -> None:
        declared = list(enumerate(self.spec.variables))
        for position, (index, rule) in enumerate(declared):
            if not is_variable_name(rule.name):
                continue  # reported by the structural check
            known = {name: r.program.type for name, r in self.variables.items()}
            later = [
                r.name
                for _, r in declared[position:]
                if is_variable_name(r.name) and r.name not in known
            ]
            env = policy_env(
                {**known, **{name: types.DYN for name in later}}, bounds=self._variable_bounds()
            )
            compiled = self._compile(
                rule.name, f"variables[{index}].expression", rule.expression, env, None
            )
            if compiled is None:
                # Keep later variables checkable: declare this one as dyn.
                self.variables[rule.name] = CompiledRule(
                    rule.name, f"variables[{index}].expression", _DynPlaceholder(), True
                )
                continue
            refs = {
                r.split(".", 1)[1]
                for r in compiled.program.references
                if r.startswith("variables.")
            }
            forward = sorted(refs & set(later))
            for name in forward:
                if name == rule.name:
                    message = f"variable {name} refers to itself"
                else:
                    message = f"variables.{name} is defined later; a variable can only use the variables before it"
                line, column = _reference_position(rule.expression, name)
                self._error(
                    f"variables[{index}].expression",
                    message,
                    rule=rule.name,
                    kind="type",
                    line=line,
                    column=column,
                )
            dependent = compiled.node_dependent or any(
                self.variables[r].node_dependent for r in refs if r in self.variables
            )
            self.variables[rule.name] = CompiledRule(
                rule.name, compiled.path, compiled.program, dependent
            )

    # -- evaluation ----------------------------------------------------------------------------

    def applies_to(self, pod: PodView) -> bool:
        """Quick pass-through test on schedulerName (matchConditions need an evaluation)."""
        return pod.get("schedulerName", "") in self.spec.scheduler_names

    def evaluate(
        self,
        pod: PodView,
        nodes: Sequence[NodeView],
        cluster: ClusterView | None = None,
        *,
        scores: bool = True,
        fast: bool = True,
        memo: bool = False,
        names: list[str] | None = None,
    ) -> Evaluation:
        """Filter verdicts and scores of `pod` on each of `nodes`.

        `scores=False` skips scoring where it cannot change a verdict (an extender filter call
        with failurePolicy Ignore). `fast=False` forces the exact path for every node (tests).
        `memo=True` (the extender's calls) reuses the per-node results of earlier pods that read
        the same from the pod, on node views evaluated then (FastPath._memo_loop).
        `names`: the nodes' names in the same order, when the caller has them (the extender's
        request): over 5000 nodes, reading each view for its name missed the CPU's caches, a
        quarter of a pod's filter (docs/perf/issue-28-profile.txt).
        """
        n = len(nodes)
        if names is None or len(names) != n:
            names = [node["name"] for node in nodes]
        if not self.applies_to(pod):
            return self._pass_through(
                names,
                f"spec.schedulerName {pod.get('schedulerName', '')!r} is not targeted by this policy",
            )
        cl = ClusterFunctions(cluster, pod)
        base = {"pod": pod, "cluster": cl}

        try:
            for rule in self.match_conditions:
                try:
                    value = rule.program.evaluate(
                        {**base, "variables": {}}, cost_limit=self.cost_limit
                    )
                except CelError as exc:
                    if self.spec.failure_policy == "Fail":
                        return self._reject_all(
                            names,
                            rule.name,
                            f"matchCondition {rule.name} could not be evaluated: {exc}",
                        )
                    return self._pass_through(
                        names, f"matchCondition {rule.name} could not be evaluated: {exc}"
                    )
                if value is not True:
                    return self._pass_through(names, f"matchCondition {rule.name} is false")
        except EvaluationTimeout as exc:
            _soft_or_raise(exc)
            return self._over_budget(names, exc)

        want_scores = scores or self.spec.failure_policy == "Fail"
        n_scores = len(self.scores)
        passed = [True] * n
        failed: list[str | None] = [None] * n
        messages: list[str | None] = [None] * n
        unresolvable = [False] * n
        errors: dict[int, list[RuleError]] = {}
        raw: list[list[Any]] = [[None] * n for _ in range(n_scores)]
        slow: list[int] = []
        stop: EvaluationTimeout | None = None  # a budget's stop (deadline.budget)
        undecided: list[int] = []  # then: the nodes not judged

        finished = None  # the memo's normalized scores, totals and extender scores
        try:
            pod_vars = self._fast.prelude(pod, cl) if fast else None
            if pod_vars is None:
                slow = list(range(n))
            else:
                passed, f_failed, messages, raw, slow, finished = self._fast.loop(
                    pod, nodes, cl, want_scores, pod_vars, names if memo else None
                )
                self._fast_verdicts(f_failed, pod, nodes, cl, failed, messages, unresolvable)
        except EvaluationTimeout as exc:
            _soft_or_raise(exc)
            stop, slow = exc, []
            if exc.partial is None:
                undecided = list(range(n))
            else:
                passed, f_failed, messages, raw, undecided = exc.partial
                self._fast_verdicts(
                    f_failed, pod, nodes, cl, failed, messages, unresolvable, stopped=True
                )

        for j, i in enumerate(slow):
            try:
                self._exact_node(
                    i,
                    pod,
                    nodes[i],
                    cl,
                    want_scores,
                    passed,
                    failed,
                    messages,
                    unresolvable,
                    errors,
                    raw,
                )
            except EvaluationTimeout as exc:
                _soft_or_raise(exc)
                stop, undecided = exc, slow[j:]
                break
        if stop is not None:
            finished = None
            self._follow_failure_policy(
                stop, undecided, passed, failed, messages, unresolvable, errors, raw
            )

        if want_scores:
            self._check_score_values(raw, passed, failed, messages, unresolvable, errors)
        for i, message in enumerate(messages if messages.count(None) != n else ()):
            # kube-scheduler shows these (events, `kubectl describe`), as do the pages and the
            # terminal: escaped (printable.py), then clipped
            if message is not None and (
                len(message) > MAX_MESSAGE_CHARS or not message.isprintable()
            ):
                # clipped before escaping too: escaping a 1 M-character message char by char
                # took 0.1 s a node; one more character than fits says it was longer
                message = printable(message[: MAX_MESSAGE_CHARS + 1])
                if len(message) > MAX_MESSAGE_CHARS:
                    message = message[: MAX_MESSAGE_CHARS - 1] + "…"
                messages[i] = message
        evaluation = Evaluation(
            policy=self.name,
            applies=True,
            reason="",
            node_names=names,
            passed=passed,
            failed_rule=failed,
            messages=messages,
            unresolvable=unresolvable,
            errors=errors,
            score_names=self.score_names,
            weights=self.weights,
            raw=raw,
            scored=scores,
            stopped=None if stop is None else self._stopped_text(stop, len(undecided), n),
        )
        if scores and finished is not None:
            evaluation.normalized, evaluation.total, evaluation.extender = finished
        elif scores:
            self._finish_scores(evaluation)
        else:
            evaluation.normalized = [[0.0] * n for _ in range(n_scores)]
            evaluation.total = [0.0] * n
            evaluation.extender = [0] * n
        return evaluation

    def queue_key(
        self,
        pod: PodView,
        namespace_labels: Mapping[str, str] | None = None,
        cluster: ClusterView | None = None,
    ) -> QueueKey:
        """The pod's queue key (its priority under this policy), clamped into queue.min..max.

        No key when the policy has no `queue:`, does not target the pod's schedulerName, or a
        matchCondition is false; an evaluation error (or a matchCondition's) is a keyless
        result with `error` set: the admission webhook then follows failurePolicy."""
        if self.queue is None or self.spec.queue is None:
            return QueueKey(None, reason="the policy has no queue")
        if not self.applies_to(pod):
            return QueueKey(
                None,
                reason=f"spec.schedulerName {pod.get('schedulerName', '')!r} is not targeted by this policy",
            )
        base = {"pod": pod, "cluster": ClusterFunctions(cluster, pod), "variables": {}}
        for rule in self.match_conditions:
            try:
                value = rule.program.evaluate(base, cost_limit=self.cost_limit)
            except CelError as exc:
                return QueueKey(
                    None,
                    reason=printable(f"matchCondition {rule.name} could not be evaluated: {exc}"),
                    error=True,
                )
            if value is not True:
                return QueueKey(None, reason=f"matchCondition {rule.name} is false")
        activation = {
            "pod": pod,
            "namespaceObject": namespace_view(pod["namespace"], namespace_labels),
        }
        try:
            raw = self.queue.program.evaluate(activation, cost_limit=self.cost_limit)
        except CelError as exc:
            return QueueKey(
                None, reason=printable(f"queue key could not be evaluated: {exc}"), error=True
            )
        if type(raw) is not int:  # a dyn expression (a label through `object`) gave another type
            return QueueKey(
                None,
                reason=f"queue key must evaluate to an int, got {cel_type_name(raw)}",
                error=True,
            )
        return QueueKey(clamp(raw, self.spec.queue.min, self.spec.queue.max), raw)

    def gang_of(
        self, pod: PodView, namespace_labels: Mapping[str, str] | None = None
    ) -> GangMembership:
        """The pod's gang (group and minimum count) under `gang:`; none when the policy has no
        `gang:`, does not target the pod's schedulerName, or the group is "" or the count is
        below 2 (seed 002 held no pod with minAvailable <= 1)."""
        if self.gang_group is None or self.gang_min_count is None:
            return GangMembership(reason="the policy has no gang")
        if not self.applies_to(pod):
            return GangMembership(
                reason=f"spec.schedulerName {pod.get('schedulerName', '')!r} is not targeted by this policy"
            )
        activation = {
            "pod": pod,
            "namespaceObject": namespace_view(pod["namespace"], namespace_labels),
        }
        try:
            group = self.gang_group.program.evaluate(activation, cost_limit=self.cost_limit)
            count = self.gang_min_count.program.evaluate(activation, cost_limit=self.cost_limit)
        except CelError as exc:
            return GangMembership(
                reason=printable(f"gang could not be evaluated: {exc}"), error=True
            )
        if type(group) is not str or type(count) is not int:
            return GangMembership(
                reason="gang.group must give a string and gang.minCount an int", error=True
            )
        if not group or count < 2:
            return GangMembership(
                group, count, reason="not in a gang (no group, or minCount below 2)"
            )
        return GangMembership(group, count)

    def variable_values(
        self, pod: PodView, node: NodeView, cluster: ClusterView | None = None
    ) -> dict[str, Any]:
        """Each variable's value on `node` (exact path), or the CelError that stopped it: what
        the preview's drill-down shows. Costs one exact evaluation per variable."""
        activation = self._activation(pod, node, ClusterFunctions(cluster, pod))
        out: dict[str, Any] = {}
        for name in self.variables:
            try:
                out[name] = activation["variables"][name]
            except CelError as exc:
                out[name] = exc
        return out

    def _fast_verdicts(
        self, f_failed, pod, nodes, cl, failed, messages, unresolvable, *, stopped: bool = False
    ) -> None:
        """The generated code's rejections (filter indexes) as rule names, with the messages
        it left to the exact path. Past a budget (`stopped`), or if it runs out here, those
        messages are the default text: the verdicts stand."""
        n = len(f_failed)
        rejected = n - f_failed.count(None)  # counted in C: usually none, no loop
        filter_names = self.filter_names
        unres_by_filter = [r.unresolvable for r in self.spec.filters]
        for i, k in enumerate(f_failed if rejected else ()):
            if k is None:
                continue
            failed[i] = filter_names[k]
            unresolvable[i] = unres_by_filter[k]
            if messages[i] is not MESSAGE_LATER:
                continue
            if not stopped:
                try:
                    messages[i] = self._message(k, pod, nodes[i], cl)
                    continue
                except EvaluationTimeout as exc:
                    _soft_or_raise(exc)
                    stopped = True
            messages[i] = f"rejected by filter {filter_names[k]} (its message was not evaluated)"

    def _follow_failure_policy(
        self, stop, undecided, passed, failed, messages, unresolvable, errors, raw
    ) -> None:
        """The nodes a budget stopped the evaluation before judging: failurePolicy Ignore
        passes them with no score, Fail rejects them (preemption cannot help), each with an
        error saying why."""
        message = (
            f"not judged: the evaluation ran past its budget of {stop.seconds:g} s "
            f"(failurePolicy {self.spec.failure_policy})"
        )
        fail_mode = self.spec.failure_policy == "Fail"
        for i in undecided:
            passed[i] = not fail_mode
            failed[i] = BUDGET_RULE if fail_mode else None
            messages[i] = message if fail_mode else None
            unresolvable[i] = fail_mode
            errors[i] = [RuleError(BUDGET_RULE, message)]
            for column in raw:
                column[i] = None

    def _over_budget(self, names: list[str], stop: EvaluationTimeout) -> Evaluation:
        """Every node under failurePolicy: the budget ran out before a node was judged."""
        n = len(names)
        evaluation = self._pass_through(names, "")
        evaluation.applies = True
        self._follow_failure_policy(
            stop,
            range(n),
            evaluation.passed,
            evaluation.failed_rule,
            evaluation.messages,
            evaluation.unresolvable,
            evaluation.errors,
            evaluation.raw,
        )
        evaluation.stopped = self._stopped_text(stop, n, n)
        return evaluation

    def _stopped_text(self, stop: EvaluationTimeout, undecided: int, n: int) -> str:
        return (
            f"the evaluation ran past its budget of {stop.seconds:g} s: {undecided} of {n} "
            f"node{'s' if n != 1 else ''} not judged, under failurePolicy "
            f"{self.spec.failure_policy}"
        )

    def _pass_through(self, names: list[str], reason: str) -> Evaluation:
        n = len(names)
        return Evaluation(
            policy=self.name,
            applies=False,
            reason=printable(reason),
            node_names=names,
            passed=[True] * n,
            failed_rule=[None] * n,
            messages=[None] * n,
            unresolvable=[False] * n,
            errors={},
            score_names=self.score_names,
            weights=self.weights,
            raw=[[None] * n for _ in self.scores],
            normalized=[[0.0] * n for _ in self.scores],
            total=[0.0] * n,
            extender=[0] * n,
        )

    def _reject_all(self, names: list[str], rule: str, message: str) -> Evaluation:
        n = len(names)
        message = printable(message)
        evaluation = self._pass_through(names, "")
        evaluation.applies = True
        evaluation.passed = [False] * n
        evaluation.failed_rule = [rule] * n
        evaluation.messages = [message] * n
        evaluation.unresolvable = [True] * n
        evaluation.errors = {i: [RuleError(rule, message)] for i in range(n)}
        return evaluation

    def _activation(self, pod: PodView, node: NodeView, cl: ClusterFunctions) -> dict[str, Any]:
        inputs: dict[str, Any] = {"pod": pod, "node": node, "cluster": cl}
        return {**inputs, "variables": LazyVariables(self.variables, inputs, self.cost_limit)}

    def _message(self, k: int, pod: PodView, node: NodeView, cl: ClusterFunctions) -> str:
        """The rejection message of filter k (exact path)."""
        rule = self.messages[k]
        default = f"rejected by filter {self.filter_names[k]}"
        if rule is None:
            return default
        try:
            value = rule.program.evaluate(
                self._activation(pod, node, cl), cost_limit=self.cost_limit
            )
        except CelError as exc:
            return f"{default} (its message failed: {exc})"
        return value if isinstance(value, str) else default

    def _exact_node(
        self, i, pod, node, cl, want_scores, passed, failed, messages, unresolvable, errors, raw
    ) -> None:
        """Full CEL semantics for one node; overwrites every column at index i."""
        activation = self._activation(pod, node, cl)
        fail_mode = self.spec.failure_policy == "Fail"
        passed[i], failed[i], messages[i], unresolvable[i] = True, None, None, False
        node_errors: list[RuleError] = []
        for k, rule in enumerate(self.filters):
            deadline_check()
            try:
                value = rule.program.evaluate(activation, cost_limit=self.cost_limit)
                if type(value) is not bool:
                    raise CelEvalError(
                        f"filter must evaluate to a bool, got {cel_type_name(value)}"
                    )
            except CelError as exc:
                node_errors.append(RuleError(rule.name, printable(str(exc))))
                if fail_mode:
                    passed[i], failed[i], unresolvable[i] = (
                        False,
                        rule.name,
                        self.spec.filters[k].unresolvable,
                    )
                    messages[i] = f"filter {rule.name} could not be evaluated: {exc}"
                    break
                continue
            if value is False:
                passed[i], failed[i], unresolvable[i] = (
                    False,
                    rule.name,
                    self.spec.filters[k].unresolvable,
                )
                messages[i] = self._message(k, pod, node, cl)
                break
        for k in range(len(self.scores)):
            raw[k][i] = None
        if passed[i] and want_scores:
            for k, rule in enumerate(self.scores):
                deadline_check()
                try:
                    value = rule.program.evaluate(activation, cost_limit=self.cost_limit)
                    if type(value) not in (int, float):
                        raise CelEvalError(
                            f"score must evaluate to a number (int or double), got {cel_type_name(value)}"
                        )
                except CelError as exc:
                    node_errors.append(RuleError(rule.name, printable(str(exc))))
                    if fail_mode:
                        passed[i], failed[i], unresolvable[i] = False, rule.name, True
                        messages[i] = f"score {rule.name} could not be evaluated: {exc}"
                        break
                    continue
                raw[k][i] = value
        if node_errors:
            errors[i] = node_errors

    def _check_score_values(self, raw, passed, failed, messages, unresolvable, errors) -> None:
        """Non-finite doubles (inf, nan) cannot be ranked: they are errors of their rule."""
        fail_mode = self.spec.failure_policy == "Fail"
        for k, column in enumerate(raw):
            if self.scores[k].program.type == types.INT:
                continue  # ints are always finite
            for i, value in enumerate(column):
                if value.__class__ is float and not math.isfinite(value):
                    column[i] = None
                    message = f"score is not a finite number ({value})"
                    errors.setdefault(i, []).append(RuleError(self.score_names[k], message))
                    if fail_mode and passed[i]:
                        passed[i], failed[i], unresolvable[i] = False, self.score_names[k], True
                        messages[i] = (
                            f"score {self.score_names[k]} could not be evaluated: {message}"
                        )

    def _finish_scores(self, ev: Evaluation) -> None:
        """normalize -> weight -> weighted mean -> extender score, over the passing nodes."""
        normalized, totals, extender = self._fast.finish(ev.passed, ev.raw)
        ev.normalized = normalized
        ev.total = totals
        ev.extender = extender


class _DynPlaceholder:
    """Stands in for a variable whose expression did not compile (so later ones still check)."""

    type = types.DYN
    references = frozenset({"node"})


# The rule name a budget's stop is reported under: parentheses, so no rule can be named so.
BUDGET_RULE = "(budget)"


def _soft_or_raise(exc: EvaluationTimeout) -> None:
    """A budget's stop is the evaluation's to finish (failurePolicy); a deadline's propagates."""
    if not exc.soft:
        raise exc


def _reference_position(source: str, name: str) -> tuple[int | None, int | None]:
    """1-based line and column of the first `variables.<name>` in `source` (None if the text
    spells it otherwise, e.g. across a comment)."""
    match = re.search(rf"\bvariables\s*\.\s*{re.escape(name)}\b", source)
    if match is None:
        return None, None
    before = source[: match.start()]
    return before.count("\n") + 1, match.start() - (before.rfind("\n") + 1) + 1
