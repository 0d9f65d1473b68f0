"""Plain-text rendering for the terminal (`evaluate`): kube-scheduler's answer and its cycle
around the policy first (the pick starred: the one answer), then the policy alone over every
node (policy-level: its verdicts, scores and own rank, no star). Every text that comes from a
document, a pod or a cluster is written through `printable`: a NUL, an ANSI escape or a bidi
override in a node name or a filter message shows as an escape, never acts on the terminal
(issue 27)."""

from __future__ import annotations

from policies.engine.compare import ranks as policy_ranks
from policies.engine.document import FieldError
from policies.engine.inputs import PodView
from policies.engine.placement import Placement
from policies.engine.results import Evaluation
from policies.formatting import number_format, printable
from policies.schedmodel.pipeline import Cycle


def located(file: str, error: FieldError, *, kind: str = "error") -> str:
    """`FILE:LINE:COL: error: field: message`, the form compilers print and editors (Vim's
    quickfix, Emacs' compile mode, VS Code's problem matchers) and CI annotators parse: one
    position, the document's; the field's path says which rule."""
    where = printable(file)
    if error.doc_line:
        where += f":{error.doc_line}"
        if error.doc_column:
            where += f":{error.doc_column}"
    return f"{where}: {kind}: {error.path or 'document'}: {error.message}"


def located_all(file: str, errors: list[FieldError], warnings: list[FieldError]) -> list[str]:
    """An invalid document's lines: its errors in document order, then its warnings, then a
    count (the one line without a position)."""
    ordered = sorted(errors, key=lambda e: (e.doc_line or 0, e.doc_column or 0))
    count = f"{len(ordered)} error{'s' if len(ordered) != 1 else ''}"
    return [
        *(located(file, error) for error in ordered),
        *(located(file, warning, kind="warning") for warning in warnings),
        f"{printable(file)}: the policy is invalid ({count})",
    ]


def _num(value: float | int | None) -> str:
    return number_format(value, places=2, missing="-")  # the terminal: ASCII for missing


def _clip(text: str, width: int) -> str:
    text = printable(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def format_evaluation(evaluation: Evaluation, *, pod: PodView, cluster: str) -> str:
    """The policy alone over every node (policy-level): passing nodes by total with the
    policy's own rank, then rejected nodes with their reasons. Not where the pod lands: kube-
    scheduler's filters and plugins come first (format_cycle).

    Each score column shows raw / normalized / weighted (normalized x weight).
    """
    rows = evaluation.rows()
    names = {r.node: printable(r.node) for r in rows}
    lines = [
        printable(
            f"policy {evaluation.policy} · pod {pod['namespace']}/{pod['name']} · cluster "
            f"{cluster} ({evaluation.size} nodes) · the policy alone over every node "
            "(policy-level)"
        )
    ]
    if evaluation.stopped:
        lines.append(f"stopped: {printable(evaluation.stopped)}")
    if not evaluation.applies:
        lines.append(
            f"pass-through: {printable(evaluation.reason)}; every node passes, nothing is scored"
        )
        return "\n".join(lines) + "\n"

    ranks = policy_ranks(evaluation)
    passing = sorted((r for r in rows if r.passed), key=lambda r: (-r.total, r.node))
    rejected = sorted((r for r in rows if not r.passed), key=lambda r: r.node)
    name_width = max([4, *(len(names[r.node]) + 2 for r in rows)])
    headers = ["NODE".ljust(name_width), "VERDICT"]
    score_headers = [
        f"{name} (w{weight})" for name, weight in zip(evaluation.score_names, evaluation.weights)
    ]
    cells: list[list[str]] = []
    for row in passing:
        scores = [f"{_num(s.raw)} / {_num(s.normalized)} / {_num(s.weighted)}" for s in row.scores]
        note = printable("; ".join(f"{e.rule}: {e.message}" for e in row.errors))
        cells.append(
            [
                f" {names[row.node]}",
                "pass",
                *scores,
                _num(row.total),
                str(row.extender_score),
                str(ranks.get(row.node) or "-"),
                note,
            ]
        )
    widths = [name_width, 7]
    widths += [
        max(len(h), *(len(c[2 + k]) for c in cells)) if cells else len(h)
        for k, h in enumerate(score_headers)
    ]
    headers += [h.ljust(w) for h, w in zip(score_headers, widths[2:])]
    headers += ["TOTAL ", "EXT", "RANK", "NOTES"]
    lines.append("  ".join(headers).rstrip())
    for cell in cells:
        parts = [cell[0].ljust(name_width), cell[1].ljust(7)]
        parts += [c.ljust(w) for c, w in zip(cell[2:-4], widths[2:])]
        parts += [cell[-4].rjust(6), cell[-3].rjust(3), cell[-2].rjust(4), cell[-1]]
        lines.append("  ".join(parts).rstrip())
    for row in rejected:
        reason = f"{row.failed_rule}: {row.message}" if row.message else str(row.failed_rule)
        kind = "unresolvable" if row.unresolvable else "resolvable"
        lines.append(
            f" {names[row.node].ljust(name_width - 1)}  reject   {_clip(reason, 120)}  [{kind}]"
        )
    summary = f"{len(passing)} of {evaluation.size} nodes pass the policy's filters"
    errors = sum(len(r.errors) for r in rows)
    if errors:
        summary += (
            f"; {errors} evaluation error{'s' if errors != 1 else ''} (failurePolicy applied)"
        )
    lines.append(summary)
    return "\n".join(lines) + "\n"


def format_cycle(cycle: Cycle, placement: Placement) -> str:
    """kube-scheduler's answer (where the pod lands, or why it cannot) and its cycle around the
    policy: per node the filters' verdict (the rejecting plugin and its reason), the policy's
    verdict, the plugins' weighted total, the extender's contribution (0-10 x weight x 10),
    the final total, and the policy's own score (total 0-100 and the 0-10 it answers) and rank
    among the nodes kube-scheduler sent it; the pick (its tie group) starred."""
    profile = cycle.profile
    total = placement.final_total()
    lines = [
        f"kube-scheduler v1.35 · {profile.strategy} · extender weight {profile.extender_weight}",
        f"answer: {printable(placement.summary())}"
        + (f" (final total {total})" if total is not None else ""),
    ]
    pick = set(cycle.pick)
    policy_ranks = placement.policy_ranks()
    scored = sorted(
        (o for o in cycle.outcomes if o.total is not None), key=lambda o: (-o.total, o.node)
    )
    others = sorted((o for o in cycle.outcomes if o.total is None), key=lambda o: o.node)
    names = {o.node: printable(o.node) for o in cycle.outcomes}
    width = max([4, *(len(names[o.node]) + 2 for o in cycle.outcomes)])
    header = ["NODE".ljust(width), "FILTERS".ljust(26), "POLICY".ljust(6), "PLUGINS"]
    lines.append("  ".join([*header, "+POLICY", " FINAL", "POLICY SCORE", "POLICY RANK"]))
    for o in scored:
        plugins = sum(s * profile.score_weight(k) for k, s in o.scores.items())
        placed = placement.node(o.node)
        if placed is not None and placed.policy_total is not None:
            score = f"{_num(placed.policy_total)} ({placed.policy_score})"
        else:
            score = "-"
        lines.append(
            "  ".join(
                [
                    (("*" if o.node in pick else " ") + names[o.node]).ljust(width),
                    "pass".ljust(26),
                    ("-" if o.policy_passed is None else "pass").ljust(6),
                    str(plugins).rjust(7),
                    str(o.extender).rjust(7),
                    str(o.total).rjust(6),
                    score.rjust(12),
                    str(policy_ranks.get(o.node) or "-").rjust(11),
                ]
            ).rstrip()
        )
    for o in others:
        if o.plugin is not None:
            verdict, why = f"reject: {o.plugin}", "; ".join(o.reasons)
            policy = "-"
        else:  # passed the plugins, rejected by the policy (the extender's filter)
            verdict, why = "pass", f"{o.policy_rule}: {o.policy_message}"
            policy = "reject"
        lines.append(
            "  ".join(
                [
                    f" {names[o.node]}".ljust(width),
                    printable(verdict).ljust(26),
                    policy.ljust(6),
                    _clip(why, 100),
                ]
            )
        )
    if cycle.skipped:
        lines.append("skipped by PreScore (no score): " + ", ".join(cycle.skipped))
    if cycle.admitted:
        lines.append("added by API admission: " + printable("; ".join(cycle.admitted)))
    if not cycle.pick:
        lines.append("kube-scheduler picks: none (the pod stays pending)")
        lines.append(f"FailedScheduling: {printable(cycle.failed_scheduling() or '')}")
    elif len(cycle.pick) == 1:
        lines.append(f"kube-scheduler picks: {printable(cycle.pick[0])}")
    else:
        lines.append(
            f"kube-scheduler picks at random among {len(cycle.pick)} tied nodes: "
            + printable(", ".join(cycle.pick))
        )
    lines += [f"caveat: {printable(c)}" for c in cycle.caveats]
    return "\n".join(lines) + "\n"
