"""The harness around the real binaries: config checks, binary lookup, process teardown and the
demo generator. No cluster needed (fake binaries are small shell scripts)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness.binaries import (
    REPO_ROOT,
    BinariesMissing,
    binaries_find,
    binaries_stamp,
    binaries_version,
)
from tests.harness.controlplane import ControlPlane
from tests.harness.demo import demo_nodes, demo_pods
from tests.harness.processes import ManagedProcess, ProcessError
from tests.harness.resources import node_manifest
from tests.harness.scheduler import scheduler_config

KUBECONFIG = Path("/tmp/admin-kubeconfig")


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


# -- scheduler configuration -------------------------------------------------------------------


def test_a_scheduler_config_gets_the_admin_kubeconfig_and_no_leader_election():
    config = scheduler_config(config="profiles: [{schedulerName: s}]", kubeconfig=KUBECONFIG)

    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    assert config["clientConnection"]["kubeconfig"] == str(KUBECONFIG)
    assert config["leaderElection"]["leaderElect"] is False
    assert config["profiles"] == [{"schedulerName": "s"}]


def test_a_scheduler_config_keeps_its_own_kubeconfig_and_is_not_mutated():
    given = {"clientConnection": {"kubeconfig": "/elsewhere", "qps": 200}}

    config = scheduler_config(config=given, kubeconfig=KUBECONFIG)

    assert config["clientConnection"] == {"kubeconfig": "/elsewhere", "qps": 200}
    assert "leaderElection" not in given


def test_a_scheduler_config_keeps_its_leader_election_when_asked_to():
    election = {"leaderElect": True, "resourceNamespace": "ns", "resourceName": "mine"}

    config = scheduler_config(
        config={"leaderElection": election}, kubeconfig=KUBECONFIG, leader_election=True
    )

    assert config["leaderElection"] == election


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ("profiles: [unclosed", "not valid YAML"),
        ("- a list", "must be a mapping, not list"),
        (
            {"kind": "Pod"},
            "kind KubeSchedulerConfiguration; got kubescheduler.config.k8s.io/v1, Pod",
        ),
        (
            {"apiVersion": "kubescheduler.config.k8s.io/v1beta3"},
            "apiVersion kubescheduler.config.k8s.io/v1",
        ),
        ({"leaderElection": {"leaderElect": True}}, "leaderElect must stay false"),
    ],
)
def test_a_bad_scheduler_config_is_refused_with_the_reason(config, error):
    with pytest.raises(ValueError, match=re.escape(error)):
        scheduler_config(config=config, kubeconfig=KUBECONFIG)


# -- binaries ----------------------------------------------------------------------------------


def test_the_pinned_kubernetes_release_is_a_1_35_patch():
    assert re.fullmatch(r"v1\.35\.\d+", binaries_version())


def _fake_build(tmp_path: Path, *, names=("etcd", "kube-apiserver", "kube-scheduler"), stamp=None):
    module = tmp_path / "module"
    module.mkdir()
    (module / "go.mod").write_text("module x\n\nrequire k8s.io/kubernetes v1.35.99\n")
    (module / "go.sum").write_text("")
    folder = tmp_path / ".cache" / "k8s" / "v1.35.99"
    folder.mkdir(parents=True)
    for name in names:
        _script(folder / name, "exit 0\n")
    (folder / ".stamp").write_text((stamp or binaries_stamp(module_dir=module)) + "\n")
    return module, folder


def test_binaries_are_found_when_all_three_match_the_stamp(tmp_path):
    module, folder = _fake_build(tmp_path)

    assert binaries_find(root=tmp_path, module_dir=module) == folder


def test_missing_binaries_name_the_build_script(tmp_path):
    module, _ = _fake_build(tmp_path, names=("etcd",))

    with pytest.raises(
        BinariesMissing,
        match=r"kube-apiserver, kube-scheduler not found .* run scripts/k8s-binaries.sh",
    ):
        binaries_find(root=tmp_path, module_dir=module)


def test_binaries_built_from_another_go_mod_are_refused(tmp_path):
    module, _ = _fake_build(tmp_path, stamp="0" * 64)

    with pytest.raises(BinariesMissing, match=re.escape("built from another tests/harness/go.mod")):
        binaries_find(root=tmp_path, module_dir=module)


# -- processes ---------------------------------------------------------------------------------


def test_a_process_that_dies_at_start_reports_its_exit_code_and_log_tail(tmp_path):
    binary = _script(tmp_path / "broken", "echo 'fatal: port 1234 in use' >&2\nexit 3\n")
    process = ManagedProcess(name="broken", argv=[binary], log_path=tmp_path / "broken.log")
    process.start()

    with pytest.raises(
        ProcessError, match=r"(?s)broken exited with code 3 .*fatal: port 1234 in use"
    ):
        process.wait_ready(check=lambda: False, timeout=10, what="ready")


def test_a_process_that_never_gets_ready_times_out_with_its_log_tail(tmp_path):
    binary = _script(tmp_path / "slow", "echo warming up\nexec sleep 60\n")
    process = ManagedProcess(name="slow", argv=[binary], log_path=tmp_path / "slow.log")
    process.start()
    try:
        # Its words in the log first, however long a busy machine takes to start a shell: the
        # 1 s deadline below is then about readiness alone.
        process.wait_ready(check=lambda: _said(process, "warming up"), timeout=60, what="words")
        with pytest.raises(
            ProcessError, match=r"(?s)did not become ready \(ready\) within 1 s.*warming up"
        ):
            process.wait_ready(check=lambda: False, timeout=1, what="ready")
    finally:
        process.stop()


def test_stop_kills_a_process_that_ignores_sigterm_and_its_children(tmp_path):
    child_pid_file = tmp_path / "child.pid"
    binary = _script(
        tmp_path / "stubborn",
        f"trap '' TERM\nsleep 60 &\necho $! > {child_pid_file}\nwhile true; do sleep 1; done\n",
    )
    process = ManagedProcess(name="stubborn", argv=[binary], log_path=tmp_path / "stubborn.log")
    process.start()
    # the whole line written, not merely the file created
    process.wait_ready(
        check=lambda: child_pid_file.read_text().endswith("\n"), timeout=60, what="child started"
    )
    child = int(child_pid_file.read_text())

    started = time.monotonic()
    process.stop(grace=0.5)

    assert process.exit_code() == -signal.SIGKILL
    # far above the 0.5 s grace however busy the machine, and below the 60 s the child would
    # take to end by itself: stop() killed the group rather than waiting for it
    assert time.monotonic() - started < 30
    assert _gone_within(pid=child, seconds=60)  # killed with its group; init reaps the orphan


def test_a_child_dies_with_the_python_process_that_started_it(tmp_path):
    # The SIGKILL stands for a CI timeout or a crashed pytest: no finalizer runs.
    code = (
        f"import os, sys; sys.path.insert(0, {str(REPO_ROOT)!r})\n"
        "from pathlib import Path\n"
        "from tests.harness.processes import ManagedProcess\n"
        f"p = ManagedProcess(name='orphan', argv=['/bin/sleep', '60'], log_path=Path({str(tmp_path / 'log')!r}))\n"
        "p.start(); print(p.pid, flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )

    assert result.returncode == -signal.SIGKILL
    assert _gone_within(pid=int(result.stdout), seconds=60)


def _said(process: ManagedProcess, words: str) -> bool:
    return words in process.log_path.read_text(errors="replace")


def _gone_within(*, pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_control_plane_whose_etcd_fails_stops_and_says_why(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir / "etcd", "echo 'etcdmain: listen tcp: address already in use' >&2\nexit 1\n")
    plane = ControlPlane(tmp_path / "plane", bin_dir=bin_dir, startup_timeout=60)

    with pytest.raises(ProcessError, match=r"(?s)etcd exited with code 1.*address already in use"):
        plane.start()

    left = sorted(p.name for p in (tmp_path / "plane").iterdir())
    assert left == ["etcd.log"]  # certificates and tokens removed, the log kept


def test_a_control_plane_whose_etcd_hangs_times_out_and_stops_it(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _script(bin_dir / "etcd", "echo 'waiting for quorum'\nexec sleep 60\n")
    plane = ControlPlane(tmp_path / "plane", bin_dir=bin_dir, startup_timeout=1)
    # The 1 s deadline starts once the fake etcd has said what it waits for, however long a busy
    # machine takes to start a shell: the log tail the error carries is then certain.
    wait_ready = ManagedProcess.wait_ready

    def wait_ready_once_it_spoke(process, **kwargs):
        wait_ready(process, check=lambda: _said(process, "quorum"), timeout=60, what="words")
        wait_ready(process, **kwargs)

    monkeypatch.setattr(ManagedProcess, "wait_ready", wait_ready_once_it_spoke)

    with pytest.raises(ProcessError, match=r"(?s)etcd did not become ready.*waiting for quorum"):
        plane.start()

    assert _gone_within(pid=plane.pids()["etcd"], seconds=60)


# -- builders and demo data --------------------------------------------------------------------


def test_a_node_manifest_defaults_allocatable_to_capacity():
    node = node_manifest(name="n", cpu="2", memory="8Gi", pods=32)

    assert (
        node["status"]["allocatable"]
        == node["status"]["capacity"]
        == {
            "cpu": "2",
            "memory": "8Gi",
            "pods": "32",
        }
    )


@pytest.mark.parametrize(
    ("taints", "error"),
    [
        ([{"effect": "NoSchedule"}], "taints[0] has no key"),
        (
            [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "Never"}],
            "taints[1].effect must be one of",
        ),
    ],
)
def test_a_bad_taint_is_refused_with_its_index(taints, error):
    with pytest.raises(ValueError, match=re.escape(error)):
        node_manifest(name="n", taints=taints)


def test_demo_nodes_spread_evenly_over_three_zones_with_mixed_sizes():
    nodes = demo_nodes(count=36)

    zones = [n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes]
    sizes = {n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in nodes}
    gpu = [n["metadata"]["name"] for n in nodes if n["spec"]["taints"]]
    # 36 nodes / 3 zones = 12 each; every 12th node (i = 11, 23, 35) is a GPU node
    assert {z: zones.count(z) for z in set(zones)} == {"zone-a": 12, "zone-b": 12, "zone-c": 12}
    assert sizes == {"demo.small", "demo.medium", "demo.large", "demo.xlarge"}
    assert gpu == ["demo-011-zone-c", "demo-023-zone-c", "demo-035-zone-c"]
    assert len({n["metadata"]["name"] for n in nodes}) == 36


@pytest.mark.parametrize(
    ("index", "cpu", "memory", "allocatable_cpu", "allocatable_memory"),
    [
        # i = 0: size (0 // 3) % 4 = 0 small: 2 cores, 8Gi -> 2000-100 = 1900m, 8192-512 = 7680Mi
        (0, "2", "8Gi", "1900m", "7680Mi"),
        # i = 4: size (4 // 3) % 4 = 1 medium: 4 cores, 16Gi -> 3900m, 16384-512 = 15872Mi
        (4, "4", "16Gi", "3900m", "15872Mi"),
        # i = 11: size (11 // 3) % 4 = 3 xlarge: 16 cores, 64Gi -> 15900m, 65536-512 = 65024Mi
        (11, "16", "64Gi", "15900m", "65024Mi"),
    ],
)
def test_demo_node_allocatable_keeps_back_system_reserve(
    index, cpu, memory, allocatable_cpu, allocatable_memory
):
    status = demo_nodes(count=12)[index]["status"]

    assert (status["capacity"]["cpu"], status["capacity"]["memory"]) == (cpu, memory)
    assert (status["allocatable"]["cpu"], status["allocatable"]["memory"]) == (
        allocatable_cpu,
        allocatable_memory,
    )


def test_demo_pods_go_only_to_untainted_nodes():
    nodes = demo_nodes(count=12)  # node 11 is the tainted GPU node

    pods = demo_pods(nodes=nodes, per_node=2)

    # 11 untainted nodes * 2 pods = 22
    assert len(pods) == 22
    assert "demo-011-zone-c" not in {node for _, node in pods}


@pytest.mark.parametrize("count", [0, -1, 5001])
def test_demo_nodes_refuse_an_out_of_range_count(count):
    with pytest.raises(ValueError, match=f"count must be between 1 and 5000, not {count}"):
        demo_nodes(count=count)
