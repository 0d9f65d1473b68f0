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

from . import existing as ex
from . import message as m
from . import plugins as p
from . import spread as sp
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
    # the rejection's status: UnschedulableAndUnresolvable (True) or Unschedulable (False), which
    # decides whether preemption tries the node
    unresolvable: bool = False
    policy_passed: bool | None = None  # None: never reached the extender
    policy_rule: str | None = None
    policy_message: str | None = None
    # plugin -> normalized 0..100; a plugin PreScore skipped (Cycle.skipped) has no entry
    scores: dict[str, int] = field(default_factory=dict)
    extender_score: int = 0  # the policy's 0..10
    extender: int = 0  # extender_score x weight x 10
    total: int | None = None  # None: not scored (rejected)

    @property
    def feasible(self) -> bool:
        return self.plugin is None

    @property
    def candidate(self) -> bool:
        return self.plugin is None and self.policy_passed is not False

    def to_dict(self, weights: dict[str, int], skipped: list[str] = ()) -> dict[str, Any]:
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
            ]
            + (
                [
                    {"plugin": name, "score": None, "weight": weights.get(name, 0), "weighted": 0}
                    | {"skipped": True}
                    for name in skipped
                ]
                if self.total is not None
                else []
            ),
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
    # score plugins whose PreScore returned Skip for this pod: they score no node
    skipped: list[str] = field(default_factory=list)
    prefilter_message: str = ""  # a PreFilter plugin rejected the pod on every node
    preemption_never: bool = False  # spec.preemptionPolicy: Never
    victims: dict[str, bool] = field(default_factory=dict)  # node -> holds a lower-priority pod
    admitted: list[str] = field(default_factory=list)  # what API admission added to the pod

    def rejection_counts(self) -> dict[str, int]:
        """reason -> nodes, as the FailedScheduling event counts them: the in-tree plugins'
        reasons and the extender's ("<rule>: <message>", the text it returns per node)."""
        counts: dict[str, int] = {}
        for o in self.outcomes:
            for reason in o.reasons:
                counts[reason] = counts.get(reason, 0) + 1
            if o.policy_passed is False:
                reason = f"{o.policy_rule}: {o.policy_message}"
                counts[reason] = counts.get(reason, 0) + 1
        return counts

    def plugin_counts(self) -> dict[str, int]:
        """filter plugin (or "Extender") -> nodes it rejected."""
        counts: dict[str, int] = {}
        for o in self.outcomes:
            name = o.plugin or ("Extender" if o.policy_passed is False else None)
            if name:
                counts[name] = counts.get(name, 0) + 1
        return counts

    def failed_scheduling(self) -> str | None:
        """The FailedScheduling event's message (message.py), None when the pod is placed."""
        if self.pick:
            return None
        total = len(self.outcomes)
        if self.prefilter_message:
            # DynamicResources' PreFilter never ran: its PostFilter fails and ends the phase
            return m.fit_error(
                total, prefilter=self.prefilter_message, counts={}, post=m.DRA_STATE_MISSING
            )
        resolvable = [
            not o.unresolvable if o.plugin else o.policy_passed is False and not o.unresolvable
            for o in self.outcomes
        ]
        preemption = m.preemption_message(
            total,
            resolvable,
            never=self.preemption_never,
            victims=[self.victims.get(o.node, False) for o in self.outcomes],
        )
        return m.fit_error(
            total, counts=self.rejection_counts(), post=f"{m.NO_CLAIMS}, {preemption}"
        )

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
            "failedScheduling": self.failed_scheduling(),
            "skippedPlugins": self.skipped,
            "admissionDefaults": self.admitted,
            "caveats": self.caveats,
            "nodes": [o.to_dict(weights, self.skipped) for o in self.outcomes],
        }


def _resource_names(pod: PodView, nodes: list[NodeView]) -> dict[str, str]:
    """CEL resource keys -> Kubernetes names ("nvidia_com_gpu" -> "nvidia.com/gpu")."""
    names = {"ephemeral_storage": "ephemeral-storage"}
    for node in nodes[:50]:
        for name in (node["object"].get("status") or {}).get("allocatable") or {}:
            names[resource_key(name)] = name
    spec = ex.spec(pod)
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for name in ((c.get("resources") or {}).get("requests") or {}) | (
            (c.get("resources") or {}).get("limits") or {}
        ):
            names[resource_key(name)] = name
    return names


def _caveats(pod: PodView, n_nodes: int, profile: Profile, victims: bool) -> list[str]:
    out = []
    spec = ex.spec(pod)
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
    if victims:
        out.append(
            "pods of lower priority run on nodes the pod does not fit: preemption may evict "
            "them (its dry run is not modelled)"
        )
    return out


def node_affinity_prefilter(pod: PodView) -> tuple[set[str] | None, bool]:
    """NodeAffinity PreFilter (node_affinity.go): (the node names every required term limits
    the pod to with `matchFields` metadata.name In, or None when some term does not; True when
    the terms' names conflict, i.e. leave no node at all)."""
    terms = p.required_node_affinity(pod)
    if not terms:
        return None, False
    names: set[str] = set()
    for term in terms:
        term_names: set[str] | None = None
        for req in term.get("matchFields") or ():
            if req.get("key") == "metadata.name" and req.get("operator") == "In":
                values = set(req.get("values") or ())
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None, False
        names |= term_names
    return names, not names


def _unresolvable(plugin: str, reasons: tuple[str, ...], pod: PodView, node: NodeView) -> bool:
    """The status code of a filter's rejection: Unschedulable only for NodePorts, a resource
    shortage the node could free (request <= allocatable, fit.go fitsRequest), a spread skew,
    and pod anti-affinity (own or existing pods'); UnschedulableAndUnresolvable otherwise."""
    if plugin == "NodePorts":
        return False
    if plugin == "NodeResourcesFit":
        alloc = node["allocatable"]
        return any(want > alloc[key] for key, want in pod["requests"].items() if want > 0)
    if plugin == "PodTopologySpread":
        return reasons[0] == p.R_SPREAD_LABEL
    if plugin == "InterPodAffinity":
        return reasons[0] == p.R_POD_AFFINITY
    return True


def _lower_priority_pods(pod: PodView, existing: ex.Existing) -> dict[str, bool]:
    """node -> holds a pod preemption could evict (priority below the pod's)."""
    return {
        node: any(o["priority"] < pod["priority"] for o in pods)
        for node, pods in existing.by_node.items()
    }


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
    existing = ex.existing_for(state)
    by_name = {n["name"]: n for n in nodes}
    names = _resource_names(pod, nodes)
    on = profile.filter_enabled
    # NodeAffinity's PreFilter runs before the others that can reject; a conflict rejects the
    # pod on every node, a name list leaves the other nodes unfiltered (schedule_one.go
    # findNodesThatFitPod: "node(s) didn't satisfy plugin(s) [NodeAffinity]").
    allowed, conflict = node_affinity_prefilter(pod) if on("NodeAffinity") else (None, False)
    prefilter_message = "pod affinity terms conflict" if conflict else ""
    spread = sp.spread_filter_state(pod, nodes, existing) if on("PodTopologySpread") else []
    affinity = p.pod_affinity_state(pod, by_name, existing) if on("InterPodAffinity") else None

    outcomes = []
    feasible: list[NodeView] = []
    for node in nodes:
        o = NodeOutcome(node["name"])
        outcomes.append(o)
        if conflict:
            o.plugin, o.reasons, o.unresolvable = "NodeAffinity", (prefilter_message,), True
            continue
        if allowed is not None and node["name"] not in allowed:
            o.plugin, o.unresolvable = "NodeAffinity", True
            o.reasons = ("node(s) didn't satisfy plugin(s) [NodeAffinity]",)
            continue
        for plugin, check in (
            ("NodeUnschedulable", lambda n: p.filter_node_unschedulable(pod, n)),
            ("NodeName", lambda n: p.filter_node_name(pod, n)),
            ("TaintToleration", lambda n: p.filter_taints(pod, n)),
            ("NodeAffinity", lambda n: p.filter_node_affinity(pod, n)),
            ("NodePorts", lambda n: p.filter_node_ports(pod, n, existing)),
            ("NodeResourcesFit", lambda n: p.filter_resources_fit(pod, n, names)),
            ("PodTopologySpread", lambda n: sp.filter_spread(pod, n, spread) if spread else None),
            ("InterPodAffinity", lambda n: p.filter_pod_affinity(n, affinity)),
        ):
            if not on(plugin):
                continue
            reasons = check(node)
            if reasons:
                o.plugin, o.reasons = plugin, tuple(reasons)
                o.unresolvable = _unresolvable(plugin, o.reasons, pod, node)
                break
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
            o.unresolvable = not o.policy_passed and evaluation.unresolvable[i]
            if evaluation.passed[i] and evaluation.scored:
                extender_scores[name] = evaluation.extender[i]
        feasible = [n for n in feasible if by_outcome[n["name"]].policy_passed]

    candidates = feasible
    pick: list[str] = []
    skipped: list[str] = []
    if len(candidates) == 1:  # kube-scheduler takes it without scoring
        pick = [candidates[0]["name"]]
    if candidates:
        totals, skipped = _score(
            pod, candidates, nodes, by_name, existing, profile, extender_scores
        )
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
    victims = _lower_priority_pods(pod, existing) if not pick else {}
    possible = any(victims.get(o.node) and not o.unresolvable for o in outcomes if not o.candidate)
    return Cycle(
        outcomes,
        pick,
        evaluation,
        profile,
        _caveats(pod, len(nodes), profile, possible),
        skipped=skipped,
        prefilter_message=prefilter_message,
        preemption_never=ex.spec(pod).get("preemptionPolicy") == "Never",
        victims=victims,
        admitted=list(pod.get("admitted") or ()),
    )


def _score(pod, candidates, all_nodes, by_name, existing, profile, extender_scores):
    """(per candidate: ({plugin: normalized score}, extender contribution), the plugins that
    PreScore skipped: NodeAffinity without preferred terms, PodTopologySpread without
    constraints, InterPodAffinity without a term to score, BalancedAllocation for a pod that
    requests none of its resources)."""
    w = profile.score_weight
    columns: dict[str, list[int] | None] = {}
    if w("TaintToleration"):
        columns["TaintToleration"] = p.default_normalize(
            [p.score_taints(pod, c) for c in candidates], reverse=True
        )
    if w("NodeAffinity"):
        preferred = (ex.spec(pod).get("affinity") or {}).get("nodeAffinity") or {}
        columns["NodeAffinity"] = (
            p.default_normalize([p.score_node_affinity(pod, c) for c in candidates], reverse=False)
            if preferred.get("preferredDuringSchedulingIgnoredDuringExecution")
            else None
        )
    if w("NodeResourcesFit"):
        pod_nonzero = ex.nonzero_requests(pod)  # once per pod, not per node
        columns["NodeResourcesFit"] = [
            p.score_resources_fit(
                pod, c, existing, profile.strategy, profile.resources, profile.shape, pod_nonzero
            )
            for c in candidates
        ]
    if w("PodTopologySpread"):
        columns["PodTopologySpread"] = sp.score_spread(pod, candidates, all_nodes, existing)
    if w("InterPodAffinity"):
        columns["InterPodAffinity"] = p.score_inter_pod_affinity(pod, candidates, by_name, existing)
    if w("NodeResourcesBalancedAllocation"):
        best_effort = not any(
            pod["requests"][r.replace("-", "_")] for r, _ in profile.balanced_resources
        )
        columns["NodeResourcesBalancedAllocation"] = (
            None
            if best_effort
            else [p.score_balanced(pod, c, profile.balanced_resources) for c in candidates]
        )
    if w("ImageLocality"):
        columns["ImageLocality"] = [
            p.score_image_locality(pod, c, existing, len(all_nodes)) for c in candidates
        ]
    skipped = [name for name, col in columns.items() if col is None]
    scored = {name: col for name, col in columns.items() if col is not None}
    # extender score (0..10) x weight x (MaxNodeScore / MaxExtenderPriority = 10)
    factor = profile.extender_weight * 10
    return [
        (
            {name: col[i] for name, col in scored.items()},
            extender_scores.get(c["name"], 0) * factor,
        )
        for i, c in enumerate(candidates)
    ], skipped
