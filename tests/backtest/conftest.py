"""Backtest fixtures: bin-packing published as v1, decisions recorded the way the extender
records them (its own record builder, stored by services.decisions_store, the bound node filled
in by a `chosen` record as bind sends it), over the demo cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies import services
from policies.cluster.manifest import pod_view_from_text
from policies.cluster.sources import cluster_load
from policies.engine.policy import compile_policy
from policies.evaluation import placement_from_cycle, pods_pending
from policies.extender.decisions import decision_record
from policies.extender.service import ServedPolicy
from policies.schedmodel.pipeline import cycle_run
from tests.conftest import make_user
from tests.redisdb import redis_database

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"
BIN_PACKING = (EXAMPLES / "bin-packing.yaml").read_text()
# example pods of schedulerName schedweb that fit somewhere in the demo cluster
RECORDED_PODS = ("web.yaml", "batch.yaml", "abc.yaml", "abcdefg.yaml")


def with_filter(document: str, expression: str, name: str = "backtest-extra") -> str:
    """`document` with one more filter (bin-packing's `filters:` list gets it first)."""
    return document.replace(
        "filters:\n",
        f"filters:\n  - name: {name}\n    expression: '{expression}'\n",
        1,
    )


def pending_schedweb() -> list[dict]:
    """The demo cluster's pending pods of schedulerName schedweb."""
    pending = pods_pending(cluster=cluster_load("demo"))
    return [p for p in pending if p["schedulerName"] == "schedweb"]


@pytest.fixture
def isolated_redis(settings):
    with redis_database(settings, 15) as client:
        yield client


@pytest.fixture
def publisher(db):
    return make_user("pat", "publisher")


@pytest.fixture
def published(publisher):
    policy = services.policy_create(actor=publisher, document=BIN_PACKING)
    services.policy_publish(
        actor=publisher, policy=policy, message="v1", revision=policy.draft_revision
    )
    return policy


def record(pod_file: str, uid: str, *, bound: bool = True, at: float | None = None) -> str:
    """Records bin-packing v1's filter decision on `pod_file` over the demo cluster and, with
    `bound`, the bind of kube-scheduler's pick (as the model predicts it); returns that node."""
    compiled = compile_policy(BIN_PACKING)
    cluster = cluster_load("demo")
    pod = pod_view_from_text((EXAMPLES / "pods" / pod_file).read_text())
    pod["uid"] = uid
    evaluation = compiled.evaluate(pod, cluster.nodes(), cluster.state)
    served = ServedPolicy(name="bin-packing", version=1, compiled=compiled)
    item = decision_record(pod, served, "filter", evaluation, at=at)
    cycle = cycle_run(pod=pod, nodes=cluster.nodes(), state=cluster.state, policy=compiled)
    pick = placement_from_cycle(cycle).pick
    batch = [item]
    if bound and pick:
        batch.append({"kind": "chosen", "podUid": uid, "node": pick[0], "at": item["at"]})
    services.decisions_store(batch=batch)
    return pick[0] if pick else ""


@pytest.fixture
def recorded(published) -> dict[str, str]:
    """Four pods decided by v1 and bound to its pick: uid -> node."""
    return {
        f"uid-{i}": record(pod_file, f"uid-{i}", at=1_700_000_000 + i)
        for i, pod_file in enumerate(RECORDED_PODS)
    }
