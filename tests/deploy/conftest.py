"""The live-cluster fixtures of tests/cluster (an isolated Redis database, unique names, watchers
in threads), shared with the chart's live RBAC tests."""

from tests.cluster.conftest import (  # noqa: F401  (pytest finds fixtures by name here)
    cluster_name,
    live_redis,
    names,
    run_watcher,
)
