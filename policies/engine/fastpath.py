"""The fast path: one generated Python function per policy that loops over the nodes (filters in
order, variables just before their first use, scores for the nodes that pass), the score pipeline
unrolled after it, and the per-node memo that reuses a node's results for equivalent pods while
its view is the same object. policy.py compiles the rules and decides what the fast path leaves
to the exact path; tests hold the two paths equal.
"""

from __future__ import annotations

import functools
import re
from itertools import repeat
from operator import is_, itemgetter
from typing import TYPE_CHECKING, Any

from . import scoring
from .cel import CodegenContext, Program, types
from .cel.deadline import EvaluationTimeout, deadline_check, deadline_get, deadline_passed, now
from .helpers import ClusterFunctions
from .inputs import PodView
from .rule import MESSAGE_LATER, CompiledRule, check_bool, check_number, variable_refs

if TYPE_CHECKING:
    from .policy import CompiledPolicy

# The per-node memo (FastPath._memo_loop): equivalence classes of pods kept, node entries per
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


class FastPath:
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
                "_check_bool": check_bool,
                "_check_number": check_number,
                "_MESSAGE_LATER": MESSAGE_LATER,
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
            for name in sorted(variable_refs(prog), key=list(self.policy.variables).index):
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
