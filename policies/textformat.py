"""Plain-text rendering of an evaluation for the terminal (`evaluate`, `policy test`)."""

from __future__ import annotations

from policies.engine.inputs import PodView
from policies.engine.results import Evaluation
from policies.formatting import number_format


def _num(value: float | int | None) -> str:
    return number_format(value, places=2, missing="-")  # the terminal: ASCII for missing


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def format_evaluation(evaluation: Evaluation, *, pod: PodView, cluster: str) -> str:
    """A table: passing nodes by total (winners starred), then rejected nodes with their reasons.

    Each score column shows raw / normalized / weighted (normalized x weight).
    """
    rows = evaluation.rows()
    lines = [
        f"policy {evaluation.policy} · pod {pod['namespace']}/{pod['name']} · cluster {cluster} ({evaluation.size} nodes)"
    ]
    if not evaluation.applies:
        lines.append(f"pass-through: {evaluation.reason}; every node passes, nothing is scored")
        return "\n".join(lines) + "\n"

    winners = set(evaluation.winners())
    passing = sorted((r for r in rows if r.passed), key=lambda r: (-r.total, r.node))
    rejected = sorted((r for r in rows if not r.passed), key=lambda r: r.node)
    name_width = max([4, *(len(r.node) + 2 for r in rows)])
    headers = ["NODE".ljust(name_width), "VERDICT"]
    score_headers = [
        f"{name} (w{weight})" for name, weight in zip(evaluation.score_names, evaluation.weights)
    ]
    cells: list[list[str]] = []
    for row in passing:
        mark = "*" if row.node in winners else " "
        scores = [f"{_num(s.raw)} / {_num(s.normalized)} / {_num(s.weighted)}" for s in row.scores]
        note = "; ".join(f"{e.rule}: {e.message}" for e in row.errors)
        cells.append(
            [f"{mark}{row.node}", "pass", *scores, _num(row.total), str(row.extender_score), note]
        )
    widths = [name_width, 7]
    widths += [
        max(len(h), *(len(c[2 + k]) for c in cells)) if cells else len(h)
        for k, h in enumerate(score_headers)
    ]
    headers += [h.ljust(w) for h, w in zip(score_headers, widths[2:])]
    headers += ["TOTAL ", "EXT", "NOTES"]
    lines.append("  ".join(headers).rstrip())
    for cell in cells:
        parts = [cell[0].ljust(name_width), cell[1].ljust(7)]
        parts += [c.ljust(w) for c, w in zip(cell[2:-3], widths[2:])]
        parts += [cell[-3].rjust(6), cell[-2].rjust(3), cell[-1]]
        lines.append("  ".join(parts).rstrip())
    for row in rejected:
        reason = f"{row.failed_rule}: {row.message}" if row.message else str(row.failed_rule)
        kind = "unresolvable" if row.unresolvable else "resolvable"
        lines.append(f" {row.node.ljust(name_width - 1)}  reject   {_clip(reason, 120)}  [{kind}]")
    summary = f"{len(passing)} of {evaluation.size} nodes pass"
    if winners:
        summary += f"; best: {', '.join(sorted(winners))}"
    errors = sum(len(r.errors) for r in rows)
    if errors:
        summary += (
            f"; {errors} evaluation error{'s' if errors != 1 else ''} (failurePolicy applied)"
        )
    lines.append(summary)
    return "\n".join(lines) + "\n"
