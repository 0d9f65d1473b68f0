"""The weight advisor: the smallest extender weight at which kube-scheduler picks the policy's
preferred node (issue 16: bin-packing at weight 1 is outvoted by LeastAllocated)."""

from __future__ import annotations

from pathlib import Path

from policies.cluster.state import ClusterState
from policies.engine.policy import compile_policy
from policies.schedmodel.advisor import weight_advise
from policies.schedmodel.pipeline import cycle_run
from policies.schedmodel.profile import profile_default
from tests.builders import make_node, make_pod

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"


def _packing_cluster():
    """The issue's shape: 50 alike nodes (4 CPU, 16 GiB), three already run
    one pod each (1 CPU, 2 GiB), as after the first placements of the issue's 40 pods."""
    nodes = [make_node(f"n-{i:02}", cpu="4", memory="16Gi") for i in range(50)]
    busy = [
        make_pod(f"busy-{i}", cpu="1", memory="2Gi", node_name=f"n-{i:02}", scheduler_name="x")
        for i in range(3)
    ]
    return nodes, busy


def _cycle(policy, pod, weight):
    nodes, busy = _packing_cluster()
    state = ClusterState.from_objects(nodes, [*busy, pod]).freeze()
    view = next(v for v in state.pods() if v["name"] == pod["metadata"]["name"])
    return cycle_run(
        pod=view,
        nodes=state.nodes(),
        state=state,
        policy=policy,
        profile=profile_default(extender_weight=weight),
    )


def test_bin_packing_on_the_issues_cluster_needs_a_weight_above_1():
    policy = compile_policy((EXAMPLES / "bin-packing.yaml").read_text())
    pod = make_pod("web-0", cpu="500m", memory="1Gi")
    advice = weight_advise(_cycle(policy, pod, 1))
    # the busy nodes are the policy's choice; at weight 1 kube-scheduler may pick an empty one
    assert set(advice.preferred) <= {"n-00", "n-01", "n-02"}
    assert not set(advice.pick) <= set(advice.preferred)
    assert advice.weight > 1
    # the advice holds: at that weight kube-scheduler picks a preferred node, one below it not
    assert set(_cycle(policy, pod, advice.weight).pick) <= set(advice.preferred)
    assert not set(_cycle(policy, pod, advice.weight - 1).pick) <= set(advice.preferred)


def test_the_same_advice_comes_from_a_cycle_at_any_weight():
    policy = compile_policy((EXAMPLES / "bin-packing.yaml").read_text())
    pod = make_pod("web-0", cpu="500m", memory="1Gi")
    assert (
        weight_advise(_cycle(policy, pod, 1)).weight == weight_advise(_cycle(policy, pod, 7)).weight
    )


def test_a_policy_that_does_not_apply_gives_no_advice():
    policy = compile_policy((EXAMPLES / "bin-packing.yaml").read_text())
    pod = make_pod("other", cpu="500m", scheduler_name="default-scheduler")
    advice = weight_advise(_cycle(policy, pod, 1))
    assert advice.weight is None and advice.reason
