"""The one boundary to the cluster: Kubernetes JSON -> engine views, snapshots and sources.

Pure modules (no `kubernetes`, no Django): `convert` (views), `state` (ClusterState and its
frozen ClusterSnapshot), `files` (the `file` source), `demo` (the bundled demo cluster and a
large-cluster generator for benchmarks).
"""

from policies.cluster.convert import ConversionError, node_view, pod_view
from policies.cluster.files import ClusterFileError, load_cluster_file
from policies.cluster.state import ClusterSnapshot, ClusterState

__all__ = [
    "ClusterFileError",
    "ClusterSnapshot",
    "ClusterState",
    "ConversionError",
    "load_cluster_file",
    "node_view",
    "pod_view",
]
