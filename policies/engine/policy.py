"""Compiling a policy document and evaluating it for a pod over candidate nodes.

A policy's expressions are type-checked one by one, then fused into ONE generated Python function
that loops over the nodes (the fast path): variables are computed just before their first use,
filters in order, scores for the nodes that pass. Any exception on a node - a CEL error, or a
construct the fast path does not try to get exactly right such as error absorption in `||` -
sends that node to the exact path (`Program.evaluate`, full CEL semantics, lazy variables),
which decides. Both paths are checked against each other and against cel-expr-python in tests.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import is_, itemgetter
from typing import Any

from . import scoring
from .cel import (
    CelCompileError,
    CelError,
    CelEvalError,
    CodegenContext,
    Program,
    compile_expression,
    policy_env,
    queue_env,
    types,
)
from .cel.deadline import (
    EvaluationTimeout,
    deadline_check,
    deadline_get,
    deadline_passed,
    now,
)
from .cel.plain import plain_message
from .document import (
    FieldError,
    ParsedDocument,
    PolicyInvalid,
    PolicySpec,
    build_spec,
    check_values,
    is_variable_name,
    locate,
    parse_text,
)
from .helpers import ClusterFunctions
from .inputs import ClusterView, NodeView, PodView
from .positions import document_position
from .printable import printable
from .queue import GangMembership, QueueKey, clamp, namespace_view
from .results import Evaluation, RuleError

DEFAULT_COST_LIMIT = 1_000_000
# The sum of the estimates of all a policy's expressions (a node may run every one of them).
DEFAULT_POLICY_COST_LIMIT = 10_000_000
# A filter message goes to kube-scheduler for every rejected node: at most this many characters.
MAX_MESSAGE_CHARS = 1024
_BOOL = (types.BOOL,)
_NUMBER = (types.INT, types.DOUBLE)
_STRING = (types.STRING,)


@dataclass(frozen=True)
class CompiledRule:
    """One checked expression of the policy and where it came from."""

    name: str
    path: str  # document path of the expression, e.g. filters[1].expression
    program: Program
    node_dependent: bool


class _Failure(Exception):
    """A rule failed to evaluate on a node; carries the rule name for the report."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule
        self.message = message


class LazyVariables(Mapping):
    """`variables` for the exact path: each is computed on first use, as in CEL policies."""

    def __init__(
        self,
        rules: dict[str, CompiledRule],
        activation: dict[str, Any],
        cost_limit: int,
        cache: dict | None = None,
    ) -> None:
        self._rules = rules
        # The inputs without `variables` itself: holding the activation that holds this map
        # would be a reference cycle, keeping a node's values alive until the next GC.
        self._inputs = {k: v for k, v in activation.items() if k != "variables"}
        self._cost_limit = cost_limit
        self._cache: dict[str, Any] = dict(cache) if cache else {}

    def __getitem__(self, name: str) -> Any:
        if name in self._cache:
            value = self._cache[name]
        else:
            rule = self._rules[name]
            try:
                value = rule.program.evaluate(
                    {**self._inputs, "variables": self}, cost_limit=self._cost_limit
                )
            except CelError as exc:
                value = _Failure(name, f"variable {name}: {exc}")
            self._cache[name] = value
        if isinstance(value, _Failure):
            raise _VariableError(value.message)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._rules)

    def __len__(self) -> int:
        return len(self._rules)


class _VariableError(CelEvalError):
    """A variable's own evaluation error, surfacing where the variable is used."""


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
        self._fast = _FastPath(self)
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
        the same from the pod, on node views evaluated then (_FastPath._memo_loop).
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
                reason=f"queue key must evaluate to an int, got {_cel_type_name(raw)}",
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
            if messages[i] is not _MESSAGE_LATER:
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
                        f"filter must evaluate to a bool, got {_cel_type_name(value)}"
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
                            f"score must evaluate to a number (int or double), got {_cel_type_name(value)}"
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


def _variable_refs(program: Program) -> set[str]:
    return {r.split(".", 1)[1] for r in program.references if r.startswith("variables.")}


def _cel_type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "bool",
        int: "int",
        float: "double",
        str: "string",
        bytes: "bytes",
        list: "list",
        dict: "map",
    }.get(type(value), type(value).__name__)


class _MessageLater:
    """Marks a rejection whose message the fast path left to the exact path."""

    def __repr__(self) -> str:
        return "<message later>"


_MESSAGE_LATER = _MessageLater()


def _check_bool(value: Any) -> bool:
    if type(value) is not bool:
        raise TypeError("not a bool")
    return value


def _check_number(value: Any) -> int | float:
    if type(value) not in (int, float):
        raise TypeError("not a number")
    return value


# The per-node memo (_FastPath._memo_loop): equivalence classes of pods kept, node entries per
# class before starting afresh (a 5000-node cluster and 16 classes: about 10 MB), and the keys of
# recent pods remembered (a class gets a memo from its second pod on).
_MEMO_KEYS = 16
_MEMO_NODES = 50_000
_MEMO_SEEN = 256
_NO_ENTRY = (None,)
_first = itemgetter(0)
_MEMO_SCALARS = frozenset({int, str, bool, bytes, type(None)})
_WORD_CL = re.compile(r"\bcl\b")
_WORD_POD = re.compile(r"\bpod\b")
_HOISTED_LOCAL = re.compile(r"\b_celh\d+\b")
_STRING_LITERAL = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")

_TABLE_WEIGHTS = 200  # weight sums up to this get lookup tables (20001 entries each)
_FLOATS = [float(i) for i in range(101)]


@functools.lru_cache(maxsize=32)
def _score_tables(weight_sum: int) -> tuple[list[float], list[int]]:
    """For each weighted sum s of whole normalized scores: the total (scoring.weighted_total's
    rounding of s / weight_sum) and the extender score, computed by the reference functions."""
    totals = [round(s / weight_sum, 6) for s in range(100 * weight_sum + 1)]
    return totals, [scoring.extender_score(t) for t in totals]


class _FastPath:
    """Generates and holds the fused Python functions of one policy."""

    def __init__(self, policy: CompiledPolicy) -> None:
        self.policy = policy
        variables = policy.variables
        self.pod_vars = [name for name, rule in variables.items() if not rule.node_dependent]
        self.node_vars = [name for name, rule in variables.items() if rule.node_dependent]
        names = {"pod": "pod", "node": "node", "cluster": "cl"}
        names.update({f"variables.{v}": f"v_{v}" for v in variables})
        self.ctx = CodegenContext(names, hoist=("pod", "node"), track_cost=policy.track_cost)
        self.ctx.globals.update(
            {
                "_check_bool": _check_bool,
                "_check_number": _check_number,
                "_MESSAGE_LATER": _MESSAGE_LATER,
                "_minmax": scoring.normalize_minmax,
                "_now": now,
                "_deadline_passed": deadline_passed,
                "_EvaluationTimeout": EvaluationTimeout,
            }
        )
        self.source = self._generate()
        namespace = dict(self.ctx.globals)
        deadline_check()
        exec(compile(self.source, f"<policy {policy.name}>", "exec"), namespace)
        self._prelude = namespace["_prelude"]
        self._loop = namespace["_loop"]
        self._finish = namespace["_finish"]
        self._key = namespace.get("_key")  # None: no memo for this policy
        self._memo: dict[tuple, dict[str, tuple]] = {}
        self._seen: set[tuple] = set()  # keys of recent pods, remembered from the second
        # A node's normalized scores, total and extender score depend on that node alone when
        # no rule normalizes over the column (minmax) and every score is an int (nothing for
        # _check_score_values to change): the memo keeps them too.
        self.finish_per_node = bool(policy.scores) and all(
            r.normalize != "minmax" and c.program.type == types.INT
            for r, c in zip(policy.spec.scores, policy.scores)
        )

    def _emit(self, rule: CompiledRule) -> str:
        deadline_check()  # code generation (constant folding included) is under the guard too
        return rule.program.emit(self.ctx)

    def _var_deps(self, program: Program, done: set[str]) -> list[str]:
        """Node-dependent variables needed by `program`, in definition order, not yet computed."""
        needed: list[str] = []

        def visit(prog: Program) -> None:
            for name in sorted(_variable_refs(prog), key=list(self.policy.variables).index):
                if name in done or name in needed or name in self.pod_vars:
                    continue
                visit(self.policy.variables[name].program)
                needed.append(name)

        visit(program)
        return needed

    def _generate(self) -> str:
        p = self.policy
        lines = ["def _prelude(pod, cl):", "    #POD_READS"]
        for name in self.pod_vars:
            lines.append(f"    v_{name} = {self._emit(p.variables[name])}")
        lines.append("    return (" + "".join(f"v_{v}, " for v in self.pod_vars) + ")")

        args = "".join(f", v_{v}" for v in self.pod_vars)
        n_scores = len(p.scores)
        lines += [
            f"def _loop(pod, nodes, cl, want_scores, dl{args}):",
            "    #POD_READS",  # cannot fail here: _prelude made the same reads first
            "    n = len(nodes)",
            "    passed = [True] * n",
            "    failed = [None] * n",
            "    msgs = [None] * n",
        ]
        lines += [f"    raw{k} = [None] * n" for k in range(n_scores)]
        lines += [
            "    slow = []",
            "    i = -1",
            # zero-cost in CPython 3.11 until raised: a budget's stop says what was judged
            "    try:",
            "     for node in nodes:",
            "        i += 1",
            # the request's deadline (deadline.py), outside the try: never a hand-over
            "        if dl is not None and _now() > dl:",
            "            _deadline_passed()",
            "        try:",
        ]
        body: list[str] = []
        done: set[str] = set()
        for k, rule in enumerate(p.filters):
            for name in self._var_deps(rule.program, done):
                body.append(f"v_{name} = {self._emit(p.variables[name])}")
                done.add(name)
            test = self._emit(rule)
            if rule.program.type != types.BOOL:
                test = f"_check_bool({test})"
            body.append(f"if not ({test}):")
            body.append(f"    passed[i] = False; failed[i] = {k}")
            message = p.messages[k]
            if message is None:
                body.append(f"    msgs[i] = {'rejected by filter ' + p.filter_names[k]!r}")
            else:
                body.append("    try:")
                for name in self._var_deps(message.program, done):
                    body.append(f"        v_{name} = {self._emit(p.variables[name])}")
                expr = self._emit(message)
                if message.program.type != types.STRING:
                    expr = f"_MESSAGE_LATER if type(_m := ({expr})) is not str else _m"
                body.append(f"        msgs[i] = {expr}")
                body.append("    except Exception:")
                body.append("        msgs[i] = _MESSAGE_LATER")
            body.append("    continue")
        if n_scores:
            body.append("if want_scores:")
            for k, rule in enumerate(p.scores):
                for name in self._var_deps(rule.program, done):
                    body.append(f"    v_{name} = {self._emit(p.variables[name])}")
                    done.add(name)
                expr = self._emit(rule)
                if rule.program.type not in (types.INT, types.DOUBLE):
                    expr = f"_check_number({expr})"
                body.append(f"    raw{k}[i] = {expr}")
        body[:0] = [f"{local} = {code}" for code, local in self.ctx.hoisted["node"].items()]
        self.memo_reads = self._memo_reads(body)
        if not body:
            body.append("pass")
        lines += [f"            {line}" for line in body]
        lines += ["        except Exception:", "            slow.append(i)"]
        raws = "[" + "".join(f"raw{k}, " for k in range(n_scores)) + "]"
        lines += [
            "    except _EvaluationTimeout as stop:",  # node i and the slow ones: not judged
            f"        stop.partial = (passed, failed, msgs, {raws}, [*slow, *range(i, n)])",
            "        raise",
            f"    return passed, failed, msgs, {raws}, slow",
        ]
        lines += self._generate_finish()
        if self.memo_reads is not None:
            lines += ["def _key(pod):", "    #POD_READS"]
            lines.append("    return (" + "".join(f"{r}, " for r in self.memo_reads) + ")")
        pod_reads = [f"    {local} = {code}" for code, local in self.ctx.hoisted["pod"].items()]
        out = []
        for line in lines:
            out.extend(pod_reads if line == "    #POD_READS" else [line])
        return "\n".join(out) + "\n"

    def _memo_reads(self, body: list[str]) -> list[str] | None:
        """The hoisted pod reads the per-node code uses, when they (with the pod variables) are
        all it takes from the pod and it reads nothing of the cluster; else None (no memo)."""
        text = _STRING_LITERAL.sub("''", "\n".join(body))  # a rule's name may say "pod"
        if _WORD_CL.search(text) or _WORD_POD.search(text):
            return None
        pod_locals = set(self.ctx.hoisted["pod"].values())
        return sorted(set(_HOISTED_LOCAL.findall(text)) & pod_locals)

    def _generate_finish(self) -> list[str]:
        """The score pipeline of scoring.py unrolled for this policy's rules and weights.

        Same arithmetic in the same order as scoring.normalize_none / weighted_total /
        extender_score (tests hold them equal), in one pass over the nodes without a function
        call per node. minmax columns need the whole column first, so they come before it.
        """
        rules = self.policy.spec.scores
        k_all = range(len(rules))
        raws = "".join(f", raw{k}" for k in k_all)
        lines = [f"def _finish(passed{raws}):"]
        for k, rule in enumerate(rules):
            if rule.normalize == "minmax":
                lines.append(
                    f"    n{k} = _minmax([v if ok else None for v, ok in zip(raw{k}, passed)])"
                )
        weight_sum = sum(r.weight for r in rules)
        columns = ", ".join(f"n{k}" for k in k_all)
        result = f"    return [{columns}{',' if rules else ''}], totals, ext"
        if weight_sum == 0:
            for k, rule in enumerate(rules):
                if rule.normalize != "minmax":
                    lines.append(
                        f"    n{k} = [0.0 if v is None or not ok else (0.0 if v <= 0 else"
                        f" (100.0 if v >= 100 else float(v))) for v, ok in zip(raw{k}, passed)]"
                    )
            lines += ["    totals = [0.0] * len(passed)", "    ext = [0] * len(passed)", result]
            return lines
        if weight_sum <= _TABLE_WEIGHTS and all(
            r.normalize != "minmax" and c.program.type == types.INT
            for r, c in zip(rules, self.policy.scores)
        ):
            return lines + self._finish_by_table(weight_sum) + [result]
        inline = [k for k, rule in enumerate(rules) if rule.normalize != "minmax"]
        lines.append("    " + "".join(f"n{k} = []; " for k in inline) + "totals = []; ext = []")
        lines.append(
            "    "
            + "".join(f"_a{k} = n{k}.append; " for k in inline)
            + "_at = totals.append; _ae = ext.append"
        )
        loop_vars = ", ".join(f"x{k}" if k not in inline else f"v{k}" for k in k_all)
        sources = ", ".join(f"n{k}" if k not in inline else f"raw{k}" for k in k_all)
        lines.append(f"    for ok, {loop_vars}, in zip(passed, {sources}):")
        lines.append("        if ok:")
        for k in inline:
            lines.append(
                f"            x{k} = 0.0 if v{k} is None or v{k} <= 0 else"
                f" (100.0 if v{k} >= 100 else float(v{k}))"
            )
        terms = " + ".join(f"x{k} * {r.weight}" for k, r in enumerate(rules))
        lines.append(f"            t = round((0 + {terms}) / {weight_sum}, 6)")
        lines.append("        else:")
        lines.append("            " + "".join(f"x{k} = " for k in inline) + "t = 0.0")
        # extender score: floor(total / 10 + 0.5); total is within 0..100, so int() is floor.
        lines.append(
            "        "
            + "".join(f"_a{k}(x{k}); " for k in inline)
            + "_at(t); _ae(int(t / 10 + 0.5))"
        )
        lines.append(result)
        return lines

    def _finish_by_table(self, weight_sum: int) -> list[str]:
        """Int scores: each normalized value is a whole number 0..100, so the weighted sum is
        an int 0..100 * weight_sum and the rounded mean and extender score are looked up
        (`_score_tables`, the reference functions' own values) instead of computed per node."""
        rules = self.policy.spec.scores
        k_all = range(len(rules))
        self.ctx.globals["_F"] = _FLOATS
        self.ctx.globals["_T"], self.ctx.globals["_E"] = _score_tables(weight_sum)
        lines = [
            "    " + "".join(f"n{k} = []; " for k in k_all) + "totals = []; ext = []",
            "    "
            + "".join(f"_a{k} = n{k}.append; " for k in k_all)
            + "_at = totals.append; _ae = ext.append",
            f"    for ok, {', '.join(f'v{k}' for k in k_all)}, in zip(passed{''.join(f', raw{k}' for k in k_all)}):",
            "        if ok:",
        ]
        for k in k_all:
            lines.append(
                f"            x{k} = 0 if v{k} is None or v{k} <= 0 else (100 if v{k} >= 100 else v{k})"
            )
        terms = " + ".join(f"x{k} * {r.weight}" for k, r in enumerate(rules))
        lines += [
            f"            s = {terms}",
            "            "
            + "".join(f"_a{k}(_F[x{k}]); " for k in k_all)
            + "_at(_T[s]); _ae(_E[s])",
            "        else:",
            "            " + "".join(f"_a{k}(0.0); " for k in k_all) + "_at(0.0); _ae(0)",
        ]
        return lines

    def prelude(self, pod: PodView, cl: ClusterFunctions) -> tuple | None:
        """Pod-only variables, once per evaluation; None sends every node to the exact path."""
        try:
            return self._prelude(pod, cl)
        except Exception:
            return None

    def loop(self, pod, nodes, cl, want_scores, pod_vars, names=None):
        """The per-node columns (passed, failed filter index, message, raw scores) and the
        indexes the exact path must take; with `names` (the nodes' names), from the memo for
        every node whose view is the one evaluated before for an equivalent pod."""
        dl = deadline_get()
        key = (
            None
            if names is None or self._key is None
            else self._memo_key(pod, pod_vars, want_scores)
        )
        if key is None:
            return (*self._loop(pod, nodes, cl, want_scores, dl, *pod_vars), None)
        return self._memo_loop(key, pod, nodes, names, cl, want_scores, dl, pod_vars)

    def _memo_key(self, pod, pod_vars, want_scores) -> tuple | None:
        """What the per-node code reads of the pod, typed (1, 1.0 and True are different CEL
        values; -0.0 and NaN are told apart by float.hex); None when a value is not a scalar."""
        key: list[Any] = [want_scores]
        for value in (*self._key(pod), *pod_vars):
            kind = type(value)
            if kind is float:
                key.append((kind, value.hex()))
            elif kind in _MEMO_SCALARS:
                key.append((kind, value))
            else:
                return None
        return tuple(key)

    def _memo_loop(self, key, pod, nodes, names, cl, want_scores, dl, pod_vars):
        """Equivalent pods (the same `key`) on the same node view get the same per-node
        results: only nodes whose view changed since (a pod bound or left, the node updated)
        or never seen are evaluated. Node views are immutable; a change is a new object.

        A key is remembered from its second pod on (a pod unlike the recent ones costs no
        bookkeeping). Each entry is one tuple, the view it was computed from first: replaced
        in one assignment, so a reader never pairs one view with another's results."""
        if dl is not None and now() > dl:
            deadline_passed()  # as the loop would before its first node: hits are no way round
        memo = self._memo.get(key)
        if memo is None:
            if key not in self._seen:
                if len(self._seen) >= _MEMO_SEEN:
                    self._seen = set()
                self._seen.add(key)
                return (*self._loop(pod, nodes, cl, want_scores, dl, *pod_vars), None)
            if len(self._memo) >= _MEMO_KEYS:
                self._memo = {}
            memo = self._memo[key] = {}
        # A result is used only for the very view it was computed from (identity, in C).
        entries = list(map(memo.get, names, repeat(_NO_ENTRY)))
        same = list(map(is_, map(_first, entries), nodes))
        miss = [] if all(same) else [i for i, hit in enumerate(same) if not hit]
        slow: list[int] = []
        n_scores = len(self.policy.scores)
        finish = want_scores and self.finish_per_node
        if miss:
            sub = [nodes[i] for i in miss]
            try:
                passed, failed, msgs, raw, sub_slow = self._loop(
                    pod, sub, cl, want_scores, dl, *pod_vars
                )
            except EvaluationTimeout as exc:
                if exc.partial is not None:  # the judged misses and every hit, by node
                    exc.partial = self._memo_partial(exc.partial, entries, same, miss)
                raise
            parts: list[list[Any]] = []
            if finish:
                normalized, totals, ext = self._finish(passed, *raw)
                parts = [*normalized, totals, ext]
            built = list(zip(sub, passed, failed, msgs, *raw, *parts))  # one tuple a node, in C
            keep = range(len(miss))
            if sub_slow:  # the exact path overwrites every column at these: not remembered
                blank = (True, None, None, *([None] * (n_scores + len(parts))))
                for j in sub_slow:
                    built[j] = (sub[j], *blank)
                    slow.append(miss[j])
                unsure = set(sub_slow)
                keep = [j for j in keep if j not in unsure]
            if len(memo) + len(miss) > _MEMO_NODES:
                memo.clear()
            for j in keep:
                memo[names[miss[j]]] = built[j]
            if len(miss) == len(entries):
                entries = built
            else:
                for j, i in enumerate(miss):
                    entries[i] = built[j]
        if not entries:
            return (*self._loop(pod, nodes, cl, want_scores, dl, *pod_vars), None)
        columns = list(zip(*entries))
        finished = None
        if finish and not slow:
            done = 4 + n_scores
            finished = (
                [list(column) for column in columns[done : done + n_scores]],
                list(columns[done + n_scores]),
                list(columns[done + n_scores + 1]),
            )
        return (
            list(columns[1]),
            list(columns[2]),
            list(columns[3]),
            [list(column) for column in columns[4 : 4 + n_scores]],
            slow,
            finished,
        )

    def _memo_partial(self, partial, entries, same, miss) -> tuple:
        """A budget's stop inside _memo_loop's evaluation of the misses, by node: the memo's
        results for the hits, the loop's for the misses it judged, the others undecided."""
        sub_passed, sub_failed, sub_msgs, sub_raw, sub_undecided = partial
        n, n_scores = len(entries), len(self.policy.scores)
        passed, failed, msgs = [True] * n, [None] * n, [None] * n
        raw: list[list[Any]] = [[None] * n for _ in range(n_scores)]
        for i, hit in enumerate(same):
            if hit:
                entry = entries[i]
                passed[i], failed[i], msgs[i] = entry[1], entry[2], entry[3]
                for k in range(n_scores):
                    raw[k][i] = entry[4 + k]
        for j, i in enumerate(miss):
            passed[i], failed[i], msgs[i] = sub_passed[j], sub_failed[j], sub_msgs[j]
            for k in range(n_scores):
                raw[k][i] = sub_raw[k][j]
        return passed, failed, msgs, raw, [miss[j] for j in sub_undecided]

    def finish(
        self, passed: list[bool], raw: list[list[Any]]
    ) -> tuple[list[list[float]], list[float], list[int]]:
        return self._finish(passed, *raw)
