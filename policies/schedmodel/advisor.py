"""The weight advisor: the smallest extender weight at which the policy's preferred node
becomes kube-scheduler's pick.

The plugins' scores do not depend on the extender weight, so one cycle (at any weight >= 1)
gives every candidate's base b (the plugins' weighted sum) and extender score e (0..10);
at weight w its total is b + 10·w·e. The policy prefers the candidates with the highest e
(e*); among them the best base b* wins. kube-scheduler picks only preferred nodes when, for
every other candidate O,

    b* + 10·w·e* > b_O + 10·w·e_O   <=>   w > (b_O - b*) / (10·(e* - e_O))

so the smallest integer weight is max(1, max over O of floor((b_O - b*) / (10·(e* - e_O))) + 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from .pipeline import Cycle


@dataclass(frozen=True)
class WeightAdvice:
    """One pod's answer: the smallest weight (None: the policy has no preference here - it
    does not apply, does not score, or no node is left), the nodes it prefers and the tie group
    kube-scheduler picks from at the cycle's weight."""

    weight: int | None
    preferred: tuple[str, ...]
    pick: tuple[str, ...]
    reason: str = ""


def weight_advise(cycle: Cycle) -> WeightAdvice:
    """The smallest extender weight at which kube-scheduler picks only nodes the policy
    prefers (formula in the module docstring), from a cycle run at any weight >= 1."""
    pick = tuple(cycle.pick)
    ev = cycle.evaluation
    if ev is None or not ev.applies or not ev.scored:
        reason = "the policy does not score this pod" if ev is not None else "no node to score"
        return WeightAdvice(None, (), pick, reason)
    scored = [o for o in cycle.outcomes if o.total is not None]
    if not scored:
        return WeightAdvice(None, (), pick, "no node passes the filters")
    best_ext = max(o.extender_score for o in scored)
    preferred = [o for o in scored if o.extender_score == best_ext]
    others = [o for o in scored if o.extender_score != best_ext]
    names = tuple(o.node for o in preferred)
    if not others:  # the policy scores every candidate alike: any weight will do
        return WeightAdvice(1, names, pick, "the policy scores every candidate alike")
    best_base = max(o.total - o.extender for o in preferred)
    weight = 1
    for o in others:
        gap = (o.total - o.extender) - best_base
        if gap >= 0:
            weight = max(weight, gap // (10 * (best_ext - o.extender_score)) + 1)
    return WeightAdvice(weight, names, pick)
