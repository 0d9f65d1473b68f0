"""`make cluster`: a real control plane with a few dozen demo nodes (3 zones, mixed sizes, a
tainted GPU pool) and some bound pods, kept up until Ctrl-C.

    .venv/bin/python -m tests.harness.demo [--nodes 36] [--pods-per-node 2] [--workdir .run/cluster]
"""

from __future__ import annotations

import argparse
import itertools
import signal
import sys
import time
from pathlib import Path
from typing import Any

from tests.harness.binaries import REPO_ROOT, BinariesMissing, binaries_find, binaries_version
from tests.harness.controlplane import ControlPlane
from tests.harness.resources import (
    namespace_create,
    node_create,
    node_manifest,
    pod_bind,
    pod_create,
    pod_manifest,
)

ZONES = ("zone-a", "zone-b", "zone-c")
# (size, cpu cores, memory GiB, max pods)
SIZES = (("small", 2, 8, 32), ("medium", 4, 16, 58), ("large", 8, 32, 110), ("xlarge", 16, 64, 110))
GPU_EVERY = 12  # every 12th node is a tainted GPU node
# (cpu millicores, memory MiB) requests, cycled over the demo pods
POD_SHAPES = ((250, 256), (500, 1024), (100, 128), (1000, 2048))
MAX_NODES = 5000


def demo_nodes(*, count: int = 36) -> list[dict[str, Any]]:
    """Deterministic Node manifests: node i sits in ZONES[i % 3] and has SIZES[(i // 3) % 4].

    Allocatable = capacity - (100m cpu, 512Mi memory) kept back for the system, as on real nodes.
    """
    if not 1 <= count <= MAX_NODES:
        raise ValueError(f"count must be between 1 and {MAX_NODES}, not {count}")
    nodes = []
    for i in range(count):
        zone = ZONES[i % len(ZONES)]
        size, cores, gib, max_pods = SIZES[(i // len(ZONES)) % len(SIZES)]
        gpu = (i + 1) % GPU_EVERY == 0
        labels = {
            "topology.kubernetes.io/region": "demo-1",
            "topology.kubernetes.io/zone": zone,
            "node.kubernetes.io/instance-type": f"demo.{size}",
            "kubernetes.io/arch": "amd64",
            "schedweb.dev/pool": "gpu" if gpu else "general",
        }
        nodes.append(
            node_manifest(
                name=f"demo-{i:03d}-{zone}",
                cpu=str(cores),
                memory=f"{gib}Gi",
                pods=max_pods,
                extra_capacity={
                    "ephemeral-storage": "100Gi",
                    **({"nvidia.com/gpu": "1"} if gpu else {}),
                },
                allocatable={"cpu": f"{cores * 1000 - 100}m", "memory": f"{gib * 1024 - 512}Mi"},
                labels=labels,
                taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
                if gpu
                else [],
            )
        )
    return nodes


def demo_pods(
    *, nodes: list[dict[str, Any]], per_node: int = 2
) -> list[tuple[dict[str, Any], str]]:
    """(pod manifest, node name) pairs: `per_node` small pods on every untainted node."""
    if per_node < 0:
        raise ValueError(f"per_node must be 0 or more, not {per_node}")
    placed = []
    shapes = itertools.cycle(POD_SHAPES)
    for node in nodes:
        if node["spec"]["taints"]:
            continue
        node_name = node["metadata"]["name"]
        for k in range(per_node):
            cpu, mib = next(shapes)
            pod = pod_manifest(
                name=f"{node_name}-app-{k}",
                namespace="demo",
                cpu=f"{cpu}m",
                memory=f"{mib}Mi",
                labels={"app": f"demo-{k}"},
            )
            placed.append((pod, node_name))
    return placed


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # same clean path as Ctrl-C


def main(argv: list[str] | None = None) -> int:
    """Run the demo control plane until interrupted."""
    parser = argparse.ArgumentParser(prog="make cluster", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=36)
    parser.add_argument("--pods-per-node", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=REPO_ROOT / ".run" / "cluster")
    args = parser.parse_args(argv)
    try:
        nodes = demo_nodes(count=args.nodes)
        pods = demo_pods(nodes=nodes, per_node=args.pods_per_node)
        bin_dir = binaries_find()
    except (ValueError, BinariesMissing) as err:
        print(f"make cluster: {err}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    signal.signal(signal.SIGHUP, _stop_on_sigterm)
    started = time.monotonic()
    try:
        with ControlPlane(args.workdir, bin_dir=bin_dir) as plane:
            api = plane.api
            for node in nodes:
                node_create(api=api, manifest=node)
            namespace_create(api=api, name="demo")
            for pod, node_name in pods:
                pod_create(api=api, manifest=pod)
                pod_bind(api=api, name=pod["metadata"]["name"], namespace="demo", node=node_name)
            limited = plane.kubeconfig_for(plane.limited_token)
            print(
                f"\nKubernetes {binaries_version()} control plane at {plane.url} "
                f"(up in {time.monotonic() - started:.1f} s): {len(nodes)} nodes in "
                f"{len(ZONES)} zones, {len(pods)} pods bound in namespace demo.\n"
                f"  admin kubeconfig:   {plane.kubeconfig}\n"
                f"  use it:             SCHEDWEB_KUBECONFIG={plane.kubeconfig} make run\n"
                f"  no-permission user: {limited} (every list is a 403)\n"
                f"  logs:               {args.workdir}/*.log\n"
                "Ctrl-C stops etcd and kube-apiserver (tokens change on every start).",
                flush=True,
            )
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        print("\nmake cluster: stopped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
