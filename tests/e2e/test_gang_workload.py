"""All-or-nothing gangs on a stock kube-scheduler (issue 11): with the GenericWorkload and
GangScheduling feature gates on (Kubernetes 1.35, alpha), schedweb's webhook links each member of
a `gang:` group to its Workload and the worker creates the Workload, so kube-scheduler places the
group whole or not at all: a gang of 4 with room for 3 has no member bound; a fourth slot
binds all 4."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import resources
from tests.harness.controlplane import ControlPlane

from .admission import admission_config_write, webhook_apply
from .conftest import wait_until
from .stack import SchedwebStack

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

GATES = "--feature-gates=GenericWorkload=true,GangScheduling=true"
GANG = """\
name: seed-002-gang-workload
schedulerNames: [schedweb]
gang: {}   # seed 002's labels: podGroup, minAvailable
"""
WORKLOADS = "/apis/scheduling.k8s.io/v1alpha1/namespaces/default/workloads"


@pytest.fixture(scope="module")
def gang_env(tmp_path_factory, redis_server):
    plane = ControlPlane(tmp_path_factory.mktemp("gang-plane"))
    stack = SchedwebStack(
        tmp_path_factory.mktemp("gang-stack"), kubeconfig=plane.kubeconfig, redis=redis_server
    )
    admission = admission_config_write(
        Path(tmp_path_factory.mktemp("gang-admission")),
        extender_url=stack.extender_url,
        tls_dir=stack.tls_dir,
    )
    plane.apiserver_args = (
        f"--admission-control-config-file={admission}",
        GATES,
        "--runtime-config=scheduling.k8s.io/v1alpha1=true",
    )
    with plane:
        try:
            stack.start()
            yield plane, stack
        finally:
            stack.stop()
            path = stack.workdir / "worker.log"
            if path.exists():
                print("--- worker.log (tail)\n" + "\n".join(path.read_text().splitlines()[-30:]))


def member(name: str, group: str = "train", size: int = 4) -> dict:
    return resources.pod_manifest(
        name=name,
        scheduler_name="schedweb",
        labels={"podGroup": group, "minAvailable": str(size)},
        cpu="10m",
        memory="16Mi",
    )


def test_a_gang_of_4_with_room_for_3_waits_whole_and_binds_whole_at_a_fourth_slot(gang_env):
    plane, stack = gang_env
    api = plane.api
    mode = wait_until(
        lambda: (
            (m := stack.request("GET", "/api/v1/cluster")[1]["gangMode"])["mode"] != "unknown" and m
        ),
        timeout=60,
        what="the worker to detect the gang mode",
    )
    assert mode["mode"] == "workload", mode
    stack.wait_serving("seed-002-gang-workload", stack.publish(GANG))
    webhook_apply(plane, stack)

    counter = iter(range(1000))

    def linked():
        name = f"probe-{next(counter)}"
        created = resources.pod_create(api=api, manifest=member(name, group="probe", size=2))
        resources.pod_delete(api=api, name=name)
        return created["spec"].get("workloadRef")

    assert wait_until(linked, timeout=60, interval=0.2, what="the webhook to link members") == {
        "name": "schedweb-probe",
        "podGroup": "members",
    }

    resources.node_create(api=api, manifest=resources.node_manifest(name="room-a", pods=3))
    names = [f"train-{i}" for i in range(4)]
    for name in names:
        created = resources.pod_create(api=api, manifest=member(name))
        assert created["spec"]["workloadRef"] == {"name": "schedweb-train", "podGroup": "members"}
    workload = wait_until(
        lambda: next(
            (w for w in api.get(WORKLOADS)["items"] if w["metadata"]["name"] == "schedweb-train"),
            None,
        ),
        timeout=60,
        what="the worker to create the Workload",
    )
    assert workload["spec"]["podGroups"] == [
        {"name": "members", "policy": {"gang": {"minCount": 4}}}
    ]

    config = stack.scheduler_config("--scheduler-name", "schedweb")
    # --v=4: on a failure, the log dump below shows GangScheduling's reasons
    with plane.start_scheduler(config, extra_args=[GATES, "--v=4"]) as scheduler:

        def judged() -> bool:
            """Every member tried: the 3 that fit wait at Permit (GangScheduling: "quorum is not
            met", nominated to room-a, not bound), the fourth is unschedulable."""
            pods = [resources.pod_get(api=api, name=n) for n in names]
            return all(
                p.get("status", {}).get("nominatedNodeName")
                or any(
                    c["type"] == "PodScheduled" and c["status"] == "False"
                    for c in p.get("status", {}).get("conditions", [])
                )
                for p in pods
            )

        try:
            wait_until(judged, timeout=60, what="kube-scheduler to judge every member")
        except AssertionError:
            for n in names:
                print(n, resources.pod_get(api=api, name=n).get("status"))
            lines = scheduler.log_path.read_text().splitlines()
            print("\n".join(line for line in lines if "train" in line)[-6000:])
            raise
        # room for 3 of 4: all or nothing means none
        assert [resources.pod_get(api=api, name=n)["spec"].get("nodeName") for n in names] == [
            None
        ] * 4
        resources.node_create(api=api, manifest=resources.node_manifest(name="room-b", pods=1))
        for name in names:
            resources.pod_wait_bound(api=api, name=name)
