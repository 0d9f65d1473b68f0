"""One scheduling cycle of kube-scheduler with the extender, as the preview shows it.

PreFilter/Filter plugins over every node -> the policy (the extender's filter) over the nodes
that passed -> Score plugins, normalized over the nodes left -> the extender's 0..10 score x
extender weight x 10 (MaxNodeScore / MaxExtenderPriority) -> total -> the highest total; equal
totals are a tie kube-scheduler breaks at random (schedule_one.go selectHost).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from policies.engine.inputs import NodeView, PodView, resource_key
from policies.engine.results import Evaluation

from . import plugins as p
from .profile import Profile, profile_default

# kube-scheduler scores every feasible node below this many nodes whatever the percentage
# (minFeasibleNodesToFind, schedule_one.go); above it the sample depends on the percentage.
MIN_FEASIBLE_NODES_TO_FIND = 100
SCORE_PLUGINS = (
    "TaintToleration",
    "NodeAffinity",
    "NodeResourcesFit",
    "PodTopologySpread",
    "InterPodAffinity",
    "NodeResourcesBalancedAllocation",
    "ImageLocality",
)


@dataclass
class NodeOutcome:
    """One node through the cycle."""

    node: str
    plugin: str | None = None  # the in-tree filter plugin that rejected it
    reasons: tuple[str, ...] = ()
    policy_passed: bool | None = None  # None: never reached the extender
    policy_rule: str | None = None
    policy_message: str | None = None
    scores: dict[str, int] = field(default_factory=dict)  # plugin -> normalized 0..100
    extender_score: int = 0  # the policy's 0..10
    extender: int = 0  # extender_score x weight x 10
    total: int | None = None  # None: not scored (rejected)

    @property
    def feasible(self) -> bool:
        return self.plugin is None

    @property
    def candidate(self) -> bool:
        return self.plugin is None and self.policy_passed is not False

    def to_dict(self, weights: dict[str, int]) -> dict[str, Any]:
        return {
            "node": self.node,
            "kubeScheduler": {
                "verdict": "pass" if self.feasible else "reject",
                "plugin": self.plugin,
                "reasons": list(self.reasons),
            },
            "policyVerdict": (
                None if self.policy_passed is None else "pass" if self.policy_passed else "reject"
            ),
            "policyRule": self.policy_rule,
            "pluginScores": [
                {
                    "plugin": name,
                    "score": score,
                    "weight": weights.get(name, 0),
                    "weighted": score * weights.get(name, 0),
                }
                for name, score in self.scores.items()
            ],
            "extenderScore": self.extender_score,
            "extenderContribution": self.extender,
            "finalTotal": self.total,
        }


@dataclass
class Cycle:
    """The model's answer for one pod."""

    outcomes: list[NodeOutcome]
    pick: list[str]  # the tie group kube-scheduler picks from (empty: unschedulable)
    evaluation: Evaluation | None  # the policy over the in-tree-feasible nodes
    profile: Profile
    caveats: list[str]

    def rejection_counts(self) -> dict[str, int]:
        """reason -> nodes, as the FailedScheduling event counts them (policy rejections are
        the extender's, which the event reports as its own text)."""
        counts: dict[str, int] = {}
        for o in self.outcomes:
            for reason in o.reasons:
                counts[reason] = counts.get(reason, 0) + 1
        return counts

    def feasible(self) -> list[str]:
        return [o.node for o in self.outcomes if o.feasible]

    def to_dict(self) -> dict[str, Any]:
        weights = {n: self.profile.score_weight(n) for n in SCORE_PLUGINS}
        return {
            "extenderWeight": self.profile.extender_weight,
            "strategy": self.profile.strategy,
            "pick": self.pick,
            "tie": len(self.pick) > 1,
            "rejections": self.rejection_counts(),
            "caveats": self.caveats,
            "nodes": [o.to_dict(weights) for o in self.outcomes],
        }


def _resource_names(pod: PodView, nodes: list[NodeView]) -> dict[str, str]:
    """CEL resource keys -> Kubernetes names ("nvidia_com_gpu" -> "nvidia.com/gpu")."""
    names = {"ephemeral_storage": "ephemeral-storage"}
    for node in nodes[:50]:
        for name in (node["object"].get("status") or {}).get("allocatable") or {}:
            names[resource_key(name)] = name
    spec = p.spec(pod)
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for name in ((c.get("resources") or {}).get("requests") or {}) | (
            (c.get("resources") or {}).get("limits") or {}
        ):
            names[resource_key(name)] = name
    return names


def _caveats(pod: PodView, n_nodes: int, profile: Profile) -> list[str]:
    out = []
    spec = p.spec(pod)
    if any("persistentVolumeClaim" in v or "ephemeral" in v for v in spec.get("volumes") or []):
        out.append(
            "the pod uses volumes: VolumeBinding, VolumeZone, VolumeRestrictions and "
            "NodeVolumeLimits are not modelled"
        )
    if spec.get("resourceClaims"):
        out.append("the pod claims devices: DynamicResources (DRA) is not modelled")
    if n_nodes > MIN_FEASIBLE_NODES_TO_FIND and profile.percentage_of_nodes_to_score != 100:
        out.append(
            f"{n_nodes} nodes: kube-scheduler stops filtering once it has found enough feasible "
            "nodes (percentageOfNodesToScore), so it may score only a sample of them"
        )
    return out


def cycle_run(
    *,
    pod: PodView,
    nodes: list[NodeView],
    state: Any,
    policy: Any = None,
    profile: Profile | None = None,
) -> Cycle:
    """kube-scheduler's cycle for `pod` over `nodes` with `policy` (a CompiledPolicy, or None
    for no extender) served by the extender; `state` is the snapshot (ClusterView)."""
    profile = profile or profile_default()
    existing = p.existing_for(state)
    by_name = {n["name"]: n for n in nodes}
    names = _resource_names(pod, nodes)
    on = profile.filter_enabled
    spread = p.spread_filter_state(pod, nodes, existing) if on("PodTopologySpread") else []
    affinity = p.pod_affinity_state(pod, by_name, existing) if on("InterPodAffinity") else None

    outcomes = []
    feasible: list[NodeView] = []
    for node in nodes:
        o = NodeOutcome(node["name"])
        for plugin, check in (
            ("NodeUnschedulable", lambda n: p.filter_node_unschedulable(pod, n)),
            ("NodeName", lambda n: p.filter_node_name(pod, n)),
            ("TaintToleration", lambda n: p.filter_taints(pod, n)),
            ("NodeAffinity", lambda n: p.filter_node_affinity(pod, n)),
            ("NodePorts", lambda n: p.filter_node_ports(pod, n, existing)),
            ("NodeResourcesFit", lambda n: p.filter_resources_fit(pod, n, names)),
            ("PodTopologySpread", lambda n: p.filter_spread(pod, n, spread) if spread else None),
            ("InterPodAffinity", lambda n: p.filter_pod_affinity(n, affinity)),
        ):
            if not on(plugin):
                continue
            reasons = check(node)
            if reasons:
                o.plugin, o.reasons = plugin, tuple(reasons)
                break
        outcomes.append(o)
        if o.plugin is None:
            feasible.append(node)

    # The extender: its filter sees the feasible nodes; minmax runs over the nodes it passes,
    # the same set its prioritize call is sent (policies/extender/service.py).
    evaluation = None
    extender_scores: dict[str, int] = {}
    if policy is not None and profile.extender_weight and feasible:
        evaluation = policy.evaluate(pod, feasible, state)
        by_outcome = {o.node: o for o in outcomes}
        for i, name in enumerate(evaluation.node_names):
            o = by_outcome[name]
            o.policy_passed = evaluation.passed[i]
            o.policy_rule = evaluation.failed_rule[i]
            o.policy_message = evaluation.messages[i]
            if evaluation.passed[i] and evaluation.scored:
                extender_scores[name] = evaluation.extender[i]
        feasible = [n for n in feasible if by_outcome[n["name"]].policy_passed]

    candidates = feasible
    pick: list[str] = []
    if len(candidates) == 1:  # kube-scheduler takes it without scoring
        pick = [candidates[0]["name"]]
    if candidates:
        totals = _score(pod, candidates, nodes, by_name, existing, profile, extender_scores)
        by_outcome = {o.node: o for o in outcomes}
        for node, (scores, ext) in zip(candidates, totals):
            o = by_outcome[node["name"]]
            o.scores = scores
            o.extender_score = extender_scores.get(node["name"], 0)
            o.extender = ext
            o.total = sum(s * profile.score_weight(k) for k, s in scores.items()) + ext
        if not pick:
            best = max(by_outcome[n["name"]].total for n in candidates)
            pick = [n["name"] for n in candidates if by_outcome[n["name"]].total == best]
    return Cycle(outcomes, pick, evaluation, profile, _caveats(pod, len(nodes), profile))


def _score(pod, candidates, all_nodes, by_name, existing, profile, extender_scores):
    """Per candidate: ({plugin: normalized score}, extender contribution)."""
    w = profile.score_weight
    n = len(candidates)
    columns: dict[str, list[int]] = {}
    if w("TaintToleration"):
        columns["TaintToleration"] = p.default_normalize(
            [p.score_taints(pod, c) for c in candidates], reverse=True
        )
    if w("NodeAffinity"):
        columns["NodeAffinity"] = p.default_normalize(
            [p.score_node_affinity(pod, c) for c in candidates], reverse=False
        )
    if w("NodeResourcesFit"):
        pod_nonzero = p.nonzero_requests(pod)  # once per pod, not per node
        columns["NodeResourcesFit"] = [
            p.score_resources_fit(
                pod, c, existing, profile.strategy, profile.resources, profile.shape, pod_nonzero
            )
            for c in candidates
        ]
    if w("PodTopologySpread"):
        spread = p.score_spread(pod, candidates, all_nodes, existing)
        columns["PodTopologySpread"] = spread if spread is not None else [0] * n
    if w("InterPodAffinity"):
        ipa = p.score_inter_pod_affinity(pod, candidates, by_name, existing)
        columns["InterPodAffinity"] = ipa if ipa is not None else [0] * n
    if w("NodeResourcesBalancedAllocation"):
        best_effort = not any(
            pod["requests"][r.replace("-", "_")] for r, _ in profile.balanced_resources
        )
        columns["NodeResourcesBalancedAllocation"] = (
            [0] * n
            if best_effort
            else [p.score_balanced(pod, c, profile.balanced_resources) for c in candidates]
        )
    if w("ImageLocality"):
        columns["ImageLocality"] = [
            p.score_image_locality(pod, c, existing, len(all_nodes)) for c in candidates
        ]
    # extender score (0..10) x weight x (MaxNodeScore / MaxExtenderPriority = 10)
    factor = profile.extender_weight * 10
    return [
        (
            {name: col[i] for name, col in columns.items()},
            extender_scores.get(c["name"], 0) * factor,
        )
        for i, c in enumerate(candidates)
    ]
