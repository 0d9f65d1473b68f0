"""The kube-scheduler v1.35.8 rules issue 23 found the model missing, one test each (the real
kube-scheduler checks them all in test_differential.py). Arithmetic in the comments."""

from __future__ import annotations

from typing import Any

from policies.cluster.state import ClusterState
from policies.schedmodel import message
from policies.schedmodel.pipeline import cycle_run
from policies.schedmodel.requests import fit_score_requests, node_nonzero_share
from tests.builders import make_node, make_pod

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _cycle(nodes, pod, pods=(), objects=()):
    state = ClusterState.from_objects(nodes, [*pods, pod], objects).freeze()
    view = next(v for v in state.pods() if v["name"] == pod["metadata"]["name"])
    return cycle_run(pod=view, nodes=state.nodes(), state=state, policy=None, profile=None)


def _outcome(cycle, name):
    return next(o for o in cycle.outcomes if o.node == name)


def _with(pod: dict[str, Any], **spec: Any) -> dict[str, Any]:
    pod["spec"].update(spec)
    return pod


def test_the_fit_score_ignores_pod_level_resources_and_balanced_allocation_counts_them():
    # containers ask 500m / nothing, the pod level 2 cpu / 1Gi. Fit's score: 500m and the
    # 200 MiB default; BalancedAllocation (pod["requests"]): 2 cpu and 1 GiB.
    pod = make_pod("p", cpu="500m")
    pod["spec"]["resources"] = {"requests": {"cpu": "2", "memory": "1Gi"}}
    assert fit_score_requests(pod["spec"]) == {"cpu": 500, "memory": 200 * 1024 * 1024}
    node = make_node("a", cpu="4", memory="4Gi")
    cycle = _cycle([node, make_node("b", cpu="4", memory="4Gi")], pod)
    scores = _outcome(cycle, "a").scores
    # Fit: cpu (4000-500)*100//4000 = 87, memory (4096-200)*100//4096 = 95 -> (87+95)//2 = 91
    assert scores["NodeResourcesFit"] == 91
    # Balanced: cpu 2/4 = .5, memory 1/4 = .25 -> (1 - |.5-.25|/2) * 100 = 87
    assert scores["NodeResourcesBalancedAllocation"] == 87


def test_a_bound_pod_with_pod_level_requests_adds_them_to_its_nodes_non_zero_share():
    pod = make_pod("p")
    pod["spec"]["resources"] = {"requests": {"cpu": "2"}}
    # cpu from the pod level; memory requested nowhere: the 200 MiB default
    assert node_nonzero_share(pod["spec"]) == (2000, 200 * 1024 * 1024)
    plain = make_pod("q", cpu="300m")
    assert node_nonzero_share(plain["spec"]) == (300, 200 * 1024 * 1024)


def _spread(policy: dict[str, str]) -> dict[str, Any]:
    return {
        "maxSkew": 1,
        "topologyKey": ZONE,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
        **policy,
    }


def test_spread_filter_counts_tainted_nodes_unless_node_taints_policy_is_honor():
    # z1 = {t1 (tainted NoSchedule, one web pod), u1}, z2 = {u2}, empty.
    # Ignore (default): z1=1, z2=0 -> u1's skew 1+1-0 = 2 > 1, rejected.
    # Honor: t1 is not counted (the pod does not tolerate its taint): z1=0, z2=0 -> u1 passes.
    taint = {"key": "t", "value": "x", "effect": "NoSchedule"}
    nodes = [
        make_node("t1", labels={ZONE: "z1"}, taints=[taint]),
        make_node("u1", labels={ZONE: "z1"}),
        make_node("u2", labels={ZONE: "z2"}),
    ]
    web = make_pod("web-0", labels={"app": "web"}, node_name="t1")
    web["spec"]["tolerations"] = [{"key": "t", "operator": "Exists"}]
    pod = make_pod("p", labels={"app": "web"})
    ignore = _cycle(nodes, _with(pod, topologySpreadConstraints=[_spread({})]), [web])
    assert _outcome(ignore, "u1").plugin == "PodTopologySpread"
    honor = _cycle(
        nodes,
        _with(make_pod("p", labels={"app": "web"}), topologySpreadConstraints=[
            _spread({"nodeTaintsPolicy": "Honor"})
        ]),
        [web],
    )  # fmt: skip
    assert _outcome(honor, "u1").plugin is None


def test_spread_filter_counts_nodes_the_pod_cannot_go_to_when_node_affinity_policy_is_ignore():
    # z1's only node a1 has disk=hdd and holds a web pod; the pod wants disk=ssd (b1, z2; c1, z3).
    nodes = [
        make_node("a1", labels={ZONE: "z1", "disk": "hdd"}),
        make_node("b1", labels={ZONE: "z2", "disk": "ssd"}),
        make_node("c1", labels={ZONE: "z3", "disk": "ssd"}),
    ]
    webs = [
        make_pod("web-0", labels={"app": "web"}, node_name="b1"),
        make_pod("web-1", labels={"app": "web"}, node_name="a1"),
    ]

    def pod(policy):
        p = make_pod("p", labels={"app": "web"}, nodeSelector={"disk": "ssd"})
        return _with(p, topologySpreadConstraints=[_spread(policy)])

    # Honor: domains z2=1, z3=0: b1 skew 1+1-0 = 2 > 1 rejected, c1 passes
    honor = _cycle(nodes, pod({}), webs)
    assert (_outcome(honor, "b1").plugin, _outcome(honor, "c1").plugin) == (
        "PodTopologySpread",
        None,
    )
    # with web-2 on c1 and web-1 gone, z1 (a1) is empty. Ignore counts it: z1=0, z2=1, z3=1,
    # minimum 0, b1's skew 1+1-0 = 2 > 1 rejected. Honor leaves a1 out: z2=1, z3=1, minimum 1,
    # b1's skew 1+1-1 = 1 passes.
    third = make_pod("web-2", labels={"app": "web"}, node_name="c1")
    ignore_empty_z1 = _cycle(nodes, pod({"nodeAffinityPolicy": "Ignore"}), [webs[0], third])
    honor_empty_z1 = _cycle(nodes, pod({}), [webs[0], third])
    assert _outcome(ignore_empty_z1, "b1").plugin == "PodTopologySpread"
    assert _outcome(honor_empty_z1, "b1").plugin is None


def test_spread_score_honours_node_taints_policy():
    # ScheduleAnyway on zone; z1 = {a (tainted, 2 web pods), b}, z2 = {c}. The pod does not
    # tolerate the taint, so a is rejected; b and c are scored.
    # Ignore: z1 counts 2, z2 0 -> raw b = round(2 * ln(2+2)) = 3, c = 0 -> b 100*(3+0-3)//3 = 0
    # Honor: a's pods are not counted -> both 0 -> 100 each.
    taint = {"key": "t", "value": "x", "effect": "NoSchedule"}
    nodes = [
        make_node("a", labels={ZONE: "z1"}, taints=[taint]),
        make_node("b", labels={ZONE: "z1"}),
        make_node("c", labels={ZONE: "z2"}),
    ]
    webs = []
    for i in range(2):
        w = make_pod(f"web-{i}", labels={"app": "web"}, node_name="a")
        w["spec"]["tolerations"] = [{"key": "t", "operator": "Exists"}]
        webs.append(w)

    def pod(policy):
        c = {**_spread(policy), "whenUnsatisfiable": "ScheduleAnyway"}
        return _with(make_pod("p", labels={"app": "web"}), topologySpreadConstraints=[c])

    ignore = _cycle(nodes, pod({}), webs)
    honor = _cycle(nodes, pod({"nodeTaintsPolicy": "Honor"}), webs)
    assert [_outcome(ignore, n).scores["PodTopologySpread"] for n in "bc"] == [0, 100]
    assert [_outcome(honor, n).scores["PodTopologySpread"] for n in "bc"] == [100, 100]


def test_several_required_affinity_terms_count_only_pods_matching_all_of_them():
    # terms app=web and tier=front (both hostname): n1 holds a web pod (tier back) and a
    # front pod (app api). Term by term both terms would hold on n1; together no pod matches
    # both, so no pair counts and n1 is rejected (the pod matches neither term itself).
    nodes = [make_node("n1"), make_node("n2")]
    pods = [
        make_pod("web", labels={"app": "web", "tier": "back"}, node_name="n1"),
        make_pod("api", labels={"app": "api", "tier": "front"}, node_name="n1"),
    ]
    terms = [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOST},
        {"labelSelector": {"matchLabels": {"tier": "front"}}, "topologyKey": HOST},
    ]
    pod = _with(
        make_pod("p"),
        affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}},
    )
    cycle = _cycle(nodes, pod, pods)
    assert _outcome(cycle, "n1").plugin == "InterPodAffinity"
    # a pod matching both terms makes n1 feasible (and n2 still not)
    both = make_pod("both", labels={"app": "web", "tier": "front"}, node_name="n1")
    cycle = _cycle(nodes, pod, [*pods, both])
    assert (_outcome(cycle, "n1").plugin, _outcome(cycle, "n2").plugin) == (
        None,
        "InterPodAffinity",
    )


def test_a_namespace_selector_on_the_name_label_matches_a_namespace_listed_without_it():
    # the cluster file lists Namespace "shop" without kubernetes.io/metadata.name; the API
    # server always sets it, so the selector matches shop's pods
    ns = {"kind": "Namespace", "metadata": {"name": "shop", "labels": {"team": "a"}}}
    nodes = [make_node("n1"), make_node("n2")]
    db = make_pod("db", namespace="shop", labels={"app": "db"}, node_name="n1")
    term = {
        "labelSelector": {"matchLabels": {"app": "db"}},
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "shop"}},
        "topologyKey": HOST,
    }
    pod = _with(
        make_pod("p"),
        affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
    )
    cycle = _cycle(nodes, pod, [db], [ns])
    assert (_outcome(cycle, "n1").plugin, _outcome(cycle, "n2").plugin) == (
        None,
        "InterPodAffinity",
    )


def _match_fields(*terms: list[str]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": names}]}
                    for names in terms
                ]
            }
        }
    }


def test_node_affinity_prefilter_leaves_other_nodes_unfiltered_and_says_so():
    # the pod names n1 only: n2 and n3 are never filtered (n3 is cordoned: no
    # NodeUnschedulable reason for it), n1 is filtered (tainted) as usual
    nodes = [
        make_node("n1", taints=[{"key": "t", "value": "x", "effect": "NoSchedule"}]),
        make_node("n2"),
        make_node("n3", unschedulable=True),
    ]
    cycle = _cycle(nodes, _with(make_pod("p"), affinity=_match_fields(["n1"])))
    assert cycle.rejection_counts() == {
        "node(s) didn't satisfy plugin(s) [NodeAffinity]": 2,
        "node(s) had untolerated taint(s)": 1,
    }
    assert cycle.failed_scheduling() == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), "
        "2 node(s) didn't satisfy plugin(s) [NodeAffinity]. no new claims to deallocate, "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


def test_node_affinity_terms_naming_no_common_node_conflict_at_prefilter():
    # one term names n1 and n2 with two requirements whose names do not intersect
    affinity = _match_fields(["n1"])
    term = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    term["nodeSelectorTerms"][0]["matchFields"].append(
        {"key": "metadata.name", "operator": "In", "values": ["n2"]}
    )
    cycle = _cycle([make_node("n1"), make_node("n2")], _with(make_pod("p"), affinity=affinity))
    assert cycle.prefilter_message == "pod affinity terms conflict"
    assert cycle.failed_scheduling() == (
        "0/2 nodes are available: pod affinity terms conflict. not found"
    )


def test_the_failed_scheduling_message_sorts_counts_as_strings_and_names_preemption():
    # 10 nodes short of cpu (3 of 4 used, the pod wants 2: resolvable, but no pod of lower
    # priority to evict), 2 tainted (unresolvable). "10 ..." sorts before "2 ..." as strings.
    nodes = [make_node(f"c{i}", cpu="4") for i in range(10)]
    hogs = [make_pod(f"hog{i}", cpu="3", node_name=f"c{i}") for i in range(10)]
    taint = {"key": "t", "value": "x", "effect": "NoSchedule"}
    nodes += [make_node(f"t{i}", taints=[taint]) for i in range(2)]
    cycle = _cycle(nodes, make_pod("p", cpu="2"), hogs)
    assert cycle.failed_scheduling() == (
        "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) had untolerated taint(s). "
        "no new claims to deallocate, preemption: 0/12 nodes are available: "
        "10 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling."
    )
    never = _with(make_pod("p", cpu="2"), preemptionPolicy="Never")
    assert (
        _cycle(nodes, never, hogs)
        .failed_scheduling()
        .endswith("preemption: not eligible due to preemptionPolicy=Never.")
    )


def test_a_request_above_the_nodes_allocatable_is_not_a_preemption_candidate():
    # 8 cpu on a 4-cpu node: Insufficient cpu, UnschedulableAndUnresolvable
    cycle = _cycle([make_node("n", cpu="4")], make_pod("p", cpu="8"))
    assert cycle.failed_scheduling().endswith(
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )


def test_histogram_sorts_entries_as_strings():
    assert message.histogram({"b": 9, "a": 10}) == "10 a, 9 b"


def test_skipped_plugins_are_listed_as_skipped_in_the_preview_data():
    cycle = _cycle([make_node("a"), make_node("b")], make_pod("p"))
    data = cycle.to_dict()
    assert set(data["skippedPlugins"]) >= {"NodeAffinity", "NodeResourcesBalancedAllocation"}
    entry = next(
        s for s in data["nodes"][0]["pluginScores"] if s["plugin"] == "NodeAffinity"
    )  # fmt: skip
    assert entry == {
        "plugin": "NodeAffinity",
        "score": None,
        "weight": 2,
        "weighted": 0,
        "skipped": True,
    }
