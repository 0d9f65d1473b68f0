"""The FailedScheduling message kube-scheduler v1.35.8 writes for a pod it cannot place.

framework/types.go FitError.Error():

    "0/<all nodes> nodes are available:" + " <PreFilter message>."          (PreFilter rejected)
                                         + " <histogram>."                    (otherwise)
                                         + " <PostFilter message>"

The histogram counts each reason over the nodes (the nodes a PreFilter result left out count
under "node(s) didn't satisfy plugin(s) [P]"), each entry "<count> <reason>", sorted as strings
(so "10 x" sorts before "9 y") and joined by ", ". The PostFilter message joins the reasons of
the PostFilter plugins with ", " (runtime/framework.go RunPostFilterPlugins):
- DynamicResources: "no new claims to deallocate" for a pod without claims. When a PreFilter
  rejected the pod before DynamicResources' PreFilter ran, its state is missing and the plugin
  answers an error, "not found", which ends the PostFilter phase there;
- DefaultPreemption: "preemption: " + the preemption's own FitError over the nodes whose status
  was Unschedulable (not ...AndUnresolvable): each node without a lower-priority pod to evict is
  "No preemption victims found for incoming pod", every other node "Preemption is not helpful
  for scheduling" (preemption/preemption.go Preempt, findCandidates; defaultpreemption
  SelectVictimsOnNode); "not eligible due to preemptionPolicy=Never." for such a pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_CLAIMS = "no new claims to deallocate"
DRA_STATE_MISSING = "not found"
NEVER = "not eligible due to preemptionPolicy=Never."


def histogram(counts: Mapping[str, int]) -> str:
    """ "<count> <reason>" entries sorted as strings (sort.Strings), joined by ", "."""
    return ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))


def fit_error(total: int, *, prefilter: str = "", counts: Mapping[str, int], post: str) -> str:
    """FitError.Error() for `total` nodes."""
    message = f"0/{total} nodes are available:"
    if prefilter:
        message += f" {prefilter}."
    elif counts:
        message += f" {histogram(counts)}."
    if post:
        message += f" {post}"
    return message


def preemption_message(
    total: int, resolvable: Iterable[bool], *, never: bool, victims: Iterable[bool]
) -> str:
    """DefaultPreemption's PostFilter message. `resolvable`: per node, whether its status was
    Unschedulable; `victims`: per node, whether it holds a pod of lower priority."""
    if never:
        return "preemption: " + NEVER
    counts: dict[str, int] = {}
    for ok, has_victims in zip(resolvable, victims):
        reason = NO_VICTIMS if ok and not has_victims else NOT_HELPFUL
        counts[reason] = counts.get(reason, 0) + 1
    return "preemption: " + fit_error(total, counts=counts, post="")
