"""The kube-scheduler model: filters with the scheduler's reasons, scores with its arithmetic,
the extender step and the tie group. Arithmetic is worked in the comments."""

from __future__ import annotations

import pytest

from policies.cluster.state import ClusterState
from policies.schedmodel import plugins as p
from policies.schedmodel import spread as sp
from policies.schedmodel.existing import existing_for
from policies.schedmodel.pipeline import cycle_run
from policies.schedmodel.profile import ProfileInvalid, profile_default, profile_parse
from tests.builders import make_node, make_pod

GI = 1024**3
NO_SCHEDULE = {"key": "gpu", "value": "true", "effect": "NoSchedule"}


def _cycle(nodes, pod, pods=(), policy=None, profile=None):
    state = ClusterState.from_objects(nodes, [*pods, pod]).freeze()
    view = next(v for v in state.pods() if v["name"] == pod["metadata"]["name"])
    return cycle_run(pod=view, nodes=state.nodes(), state=state, policy=policy, profile=profile)


def _outcome(cycle, name):
    return next(o for o in cycle.outcomes if o.node == name)


def _match_field(operator: str, name: str) -> dict:
    """Required node affinity with one matchFields requirement on metadata.name."""
    field = {"key": "metadata.name", "operator": operator, "values": [name]}
    required = {"nodeSelectorTerms": [{"matchFields": [field]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}


@pytest.mark.parametrize(
    ("node", "pod", "plugin", "reasons"),
    [
        (
            make_node("n", unschedulable=True),
            {},
            "NodeUnschedulable",
            ["node(s) were unschedulable"],
        ),
        (
            make_node("n", taints=[NO_SCHEDULE]),
            {},
            "TaintToleration",
            ["node(s) had untolerated taint(s)"],
        ),
        # a NotReady node carries the node lifecycle controller's NoExecute taint
        (
            make_node("n", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]),
            {},
            "TaintToleration",
            ["node(s) had untolerated taint(s)"],
        ),
        (
            make_node("n", taints=[NO_SCHEDULE]),
            {"tolerations": [{"key": "gpu", "operator": "Exists"}]},
            None,
            [],
        ),
        (
            make_node("n", taints=[{"key": "x", "value": "", "effect": "PreferNoSchedule"}]),
            {},
            None,
            [],
        ),
        (
            make_node("n"),
            {"nodeSelector": {"disk": "ssd"}},
            "NodeAffinity",
            ["node(s) didn't match Pod's node affinity/selector"],
        ),
        (
            make_node("n"),
            {"affinity": _match_field("In", "other")},
            # PreFilter narrowed the nodes to "other": n is never filtered
            "NodeAffinity",
            ["node(s) didn't satisfy plugin(s) [NodeAffinity]"],
        ),
        (
            make_node("n"),
            {"affinity": _match_field("NotIn", "n")},
            "NodeAffinity",
            ["node(s) didn't match Pod's node affinity/selector"],
        ),
        # 4 cpu allocatable, 5 requested: Insufficient cpu; 2 GPUs wanted, none there
        (
            make_node("n", cpu="4"),
            {"cpu": "5", "gpus": 2},
            "NodeResourcesFit",
            ["Insufficient cpu", "Insufficient nvidia.com/gpu"],
        ),
        (make_node("n", pods="0"), {}, "NodeResourcesFit", ["Too many pods"]),
    ],
)
def test_each_filter_rejects_with_the_schedulers_own_reason(node, pod, plugin, reasons):
    kwargs = dict(pod)
    cycle = _cycle([node], make_pod("p", **kwargs))
    o = _outcome(cycle, "n")
    assert (o.plugin, list(o.reasons)) == (plugin, reasons)


def test_init_containers_and_sidecars_count_as_kube_scheduler_sums_them():
    from tests.builders import make_container

    # init 3 cpu; regular 1 cpu + sidecar 1 cpu -> max(1 + 1, 3) = 3 cpu > 2.5 allocatable
    pod = make_pod(
        "p",
        cpu="1",
        init_containers=[
            make_container("side", requests={"cpu": "1"}, restart_policy="Always"),
            make_container("init", requests={"cpu": "3"}),
        ],
    )
    cycle = _cycle([make_node("n", cpu="2500m")], pod)
    assert _outcome(cycle, "n").reasons == ("Insufficient cpu",)


def test_a_used_host_port_rejects_the_node():
    web = {"name": "app", "image": "nginx", "ports": [{"containerPort": 80, "hostPort": 8080}]}
    bound = make_pod("old", node_name="a", containers=[web])
    cycle = _cycle([make_node("a"), make_node("b")], make_pod("p", containers=[web]), [bound])
    assert _outcome(cycle, "a").reasons == (p.R_PORTS,)
    assert _outcome(cycle, "b").feasible


def test_topology_spread_do_not_schedule_rejects_the_skewed_zone():
    constraint = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    nodes = [make_node("a", zone="z1"), make_node("b", zone="z2"), make_node("c")]
    bound = [make_pod("w1", node_name="a", labels={"app": "web"})]
    pod = make_pod("p", labels={"app": "web"}, topologySpreadConstraints=[constraint])
    cycle = _cycle(nodes, pod, bound)
    # z1: 1 + 1 (itself) - min 0 = 2 > 1; z2: 0 + 1 - 0 = 1; c has no zone label
    assert _outcome(cycle, "a").reasons == (p.R_SPREAD,)
    assert _outcome(cycle, "b").feasible
    assert _outcome(cycle, "c").reasons == (p.R_SPREAD_LABEL,)


def test_required_pod_anti_affinity_and_existing_anti_affinity_reject():
    term = {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": {"app": "db"}},
    }
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    nodes = [make_node("a"), make_node("b")]
    bound = [make_pod("db1", node_name="a", labels={"app": "db"}, affinity=anti)]
    cycle = _cycle(nodes, make_pod("p", labels={"app": "db"}, affinity=anti), bound)
    assert _outcome(cycle, "a").reasons == (p.R_POD_ANTI,)
    plain = _cycle(nodes, make_pod("q", labels={"app": "db"}), bound)
    assert _outcome(plain, "a").reasons == (p.R_EXISTING_ANTI,)
    assert _outcome(plain, "b").feasible


@pytest.mark.parametrize(
    ("requested", "capacity", "least", "most"),
    [
        (1000, 4000, 75, 25),  # (4000-1000)*100//4000 = 75; 1000*100//4000 = 25
        (3000, 4000, 25, 75),
        (5000, 4000, 0, 100),  # over capacity: least 0, most caps requested at capacity
        (1, 3, 66, 33),  # 2*100//3 = 66 (integer division)
    ],
)
def test_least_and_most_requested_scores(requested, capacity, least, most):
    assert p.least_requested(requested, capacity) == least
    assert p.most_requested(requested, capacity) == most


@pytest.mark.parametrize(
    ("scores", "reverse", "expected"),
    [
        ([0, 1, 2], False, [0, 50, 100]),  # s*100//max(2)
        ([0, 1, 2], True, [100, 50, 0]),  # 100 - that
        ([0, 0], True, [100, 100]),  # max 0, reversed: all 100
        ([1, 3], False, [33, 100]),  # 100//3 = 33
    ],
)
def test_default_normalize(scores, reverse, expected):
    assert p.default_normalize(scores, reverse=reverse) == expected


def test_resource_and_balanced_scores_of_one_node_worked_through():
    # node 4 cpu / 16Gi, one bound pod of 1 cpu / 4Gi; the pod asks 1 cpu / 2Gi
    nodes = [make_node("a", cpu="4", memory="16Gi")]
    bound = [make_pod("old", node_name="a", cpu="1", memory="4Gi")]
    cycle = _cycle(nodes, make_pod("p", cpu="1", memory="2Gi"), bound)
    scores = _outcome(cycle, "a").scores
    # LeastAllocated: cpu (4000-2000)*100//4000 = 50; memory (16-6)*100//16 = 62; (50+62)//2 = 56
    assert scores["NodeResourcesFit"] == 56
    # Balanced: fractions 2/4 = 0.5 and 6/16 = 0.375; std = 0.0625; (1-0.0625)*100 = 93
    assert scores["NodeResourcesBalancedAllocation"] == 93
    # a single candidate is picked without scoring, but the scores are shown
    assert cycle.pick == ["a"]


def test_a_pod_without_requests_scores_with_the_100m_and_200mb_defaults():
    # non-zero cpu 100m on 1 cpu: (1000-100)*100//1000 = 90; memory 200Mi of 1000Mi -> 80
    cycle = _cycle([make_node("a", cpu="1", memory="1000Mi")], make_pod("p"))
    assert _outcome(cycle, "a").scores["NodeResourcesFit"] == (90 + 80) // 2
    # best-effort pod: BalancedAllocation's PreScore skips it (no score, not 0)
    assert "NodeResourcesBalancedAllocation" in cycle.skipped
    assert "NodeResourcesBalancedAllocation" not in _outcome(cycle, "a").scores


def test_prefer_no_schedule_taints_and_preferred_node_affinity_score():
    soft = {"key": "spot", "value": "", "effect": "PreferNoSchedule"}
    nodes = [make_node("a", taints=[soft], labels={"disk": "ssd"}), make_node("b")]
    pref = [
        {
            "weight": 5,
            "preference": {
                "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]
            },
        }
    ]
    cycle = _cycle(
        nodes,
        make_pod(
            "p",
            cpu="1",
            affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": pref}},
        ),
    )
    # taints raw a=1 b=0 -> reversed 100 - 100*1//1 = 0, b 100
    assert _outcome(cycle, "a").scores["TaintToleration"] == 0
    assert _outcome(cycle, "b").scores["TaintToleration"] == 100
    # node affinity raw a=5 b=0 -> a 100, b 0
    assert _outcome(cycle, "a").scores["NodeAffinity"] == 100
    assert _outcome(cycle, "b").scores["NodeAffinity"] == 0
    # totals: a 0*3 + 100*2 + ..., b 100*3 + 0*2 + ...: same resource scores, b wins by 100
    assert _outcome(cycle, "b").total - _outcome(cycle, "a").total == 100
    assert cycle.pick == ["b"]


def test_equal_nodes_are_a_tie_group():
    cycle = _cycle(
        [make_node("a"), make_node("b"), make_node("c", taints=[NO_SCHEDULE])],
        make_pod("p", cpu="1"),
    )
    assert cycle.pick == ["a", "b"]
    assert cycle.feasible() == ["a", "b"]
    assert cycle.rejection_counts() == {"node(s) had untolerated taint(s)": 1}


def test_the_extender_score_joins_times_weight_times_ten_and_minmax_runs_over_feasible_nodes():
    from policies.engine.policy import compile_policy

    policy = compile_policy(
        """
name: most-cpu
schedulerNames: [schedweb]
scores:
  - name: cpu
    expression: node.allocatable.cpu
    normalize: minmax
"""
    )
    # the 16-cpu node is tainted: minmax runs over a (2 cpu) and b (4 cpu) only
    nodes = [
        make_node("a", cpu="2"),
        make_node("b", cpu="4"),
        make_node("big", cpu="16", taints=[NO_SCHEDULE]),
    ]
    cycle = _cycle(
        nodes,
        make_pod("p", scheduler_name="schedweb"),
        policy=policy,
        profile=profile_default(extender_weight=5),
    )
    a, b = _outcome(cycle, "a"), _outcome(cycle, "b")
    # normalized a = 0, b = 100 -> extender 0 and 10; x weight 5 x 10 -> 0 and 500
    assert (a.extender_score, b.extender_score) == (0, 10)
    assert (a.extender, b.extender) == (0, 500)
    assert _outcome(cycle, "big").policy_passed is None  # never reached the extender
    assert cycle.pick == ["b"]


def test_a_pasted_configuration_sets_weights_strategy_and_extender_weight():
    profile = profile_parse(
        """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
profiles:
  - schedulerName: default-scheduler
    plugins:
      multiPoint:
        enabled: [{name: TaintToleration, weight: 7}]
        disabled: [{name: ImageLocality}]
    pluginConfig:
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
            resources: [{name: cpu, weight: 2}, {name: memory, weight: 1}]
extenders:
  - urlPrefix: http://127.0.0.1:8000/extender
    weight: 5
"""
    )
    assert profile.score_weight("TaintToleration") == 7
    assert profile.score_weight("ImageLocality") == 0
    assert profile.strategy == "MostAllocated"
    assert profile.resources == (("cpu", 2), ("memory", 1))
    assert profile.extender_weight == 5
    assert profile.percentage_of_nodes_to_score == 100


def test_a_bad_configuration_reports_every_problem_at_once():
    with pytest.raises(ProfileInvalid) as exc:
        profile_parse("apiVersion: v0\nkind: Nope\nextenders: [{weight: 0}]\n")
    assert len(exc.value.errors) == 3


def test_every_problem_of_a_pasted_configuration_names_its_field_path():
    text = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: lots
profiles:
- schedulerName: schedweb
  plugins:
    score:
      enabled:
      - {name: TaintToleration, weight: heavy}
      - {weight: 2}
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy: {type: Packed}
extenders: [{weight: x}]
"""
    with pytest.raises(ProfileInvalid) as exc:
        profile_parse(text)
    assert exc.value.errors == [
        "profiles[0].plugins.score.enabled[0].weight: expected an integer, got 'heavy'",
        "profiles[0].plugins.score.enabled[1].name: required",
        "profiles[0].pluginConfig[0].args.scoringStrategy.type: unknown 'Packed'",
        "extenders[0].weight: expected an integer, got 'x'",
        "extenders[0].weight: must be a positive integer",
        "percentageOfNodesToScore: expected an integer, got 'lots'",
    ]


def test_image_locality_scores_the_images_a_live_node_reports():
    # Issue 16's differential test: the node view used to drop status.images, so ImageLocality
    # scored 0 everywhere while kube-scheduler scored it. 2 nodes, the pod's 300 MiB image on
    # node a only: int(300 MiB * 1/2) = 150 MiB; 100 * (150 - 23) // (1000 - 23) = 12 (1 container)
    a = make_node("a")
    a["status"]["images"] = [{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 300 * 2**20}]
    pod = make_pod("p")
    pod["spec"]["containers"][0]["image"] = "registry.k8s.io/pause:3.10"
    cycle = _cycle([a, make_node("b")], pod)
    assert _outcome(cycle, "a").scores["ImageLocality"] == 12
    assert _outcome(cycle, "b").scores["ImageLocality"] == 0


def test_spread_counts_per_node_equal_the_node_by_node_count():
    # _counts_by_node (one pass over the namespace) must count what countPodsMatchSelector
    # counts on each node's pods: the differential test's agreement rests on it
    from policies.cluster.demo import generate_cluster

    nodes, pods = generate_cluster(60, 600, seed=5)
    state = ClusterState.from_objects(nodes, pods).freeze()
    existing = existing_for(state)
    for pod in [q for q in state.pods() if q["labels"]][:20]:
        selector = {"matchLabels": dict(pod["labels"])}
        counts = sp._counts_by_node(existing, selector, pod["namespace"])
        for node in state.nodes():
            expected = sum(
                1
                for q in existing.by_node.get(node["name"], ())
                if q["namespace"] == pod["namespace"]
                and p.label_selector_matches(selector, q["labels"])
            )
            assert counts.get(node["name"], 0) == expected
