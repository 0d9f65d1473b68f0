"""cluster_source(): demo and file caching, the live snapshot through Redis, the direct listing
for one-shot use, `manage.py evaluate --cluster live` against the real API server, and the
extender's live_snapshots()."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.core.management import call_command

from policies.cluster.demo import demo_objects
from policies.cluster.live import LiveClient
from policies.cluster.sources import cluster_load, cluster_source, live_snapshots
from policies.cluster.store import SnapshotStore
from policies.errors import ClusterUnavailable, InputError
from tests.harness.resources import node_create, node_manifest

from .conftest import synced_reader, wait_until

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"


def _write_cluster(path: Path, nodes: list[dict]) -> None:
    path.write_text(json.dumps({"kind": "List", "items": [{"kind": "Node", **n} for n in nodes]}))


def test_the_demo_source_is_built_once(settings):
    first = cluster_source("demo").snapshot()
    assert first.source == "demo" and first.state.node_count() == len(demo_objects()[0])
    assert cluster_source("demo").snapshot() is first


def test_a_file_is_loaded_again_only_when_it_changes(tmp_path):
    nodes, _ = demo_objects()
    path = tmp_path / "cluster.json"
    _write_cluster(path, nodes[:3])
    first = cluster_source(str(path)).snapshot()
    assert first.state.node_count() == 3 and first.source == "file"
    assert cluster_source(str(path)).snapshot().state is first.state  # unchanged: cached
    _write_cluster(path, nodes[:5])
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    second = cluster_source(str(path)).snapshot()
    assert second.state.node_count() == 5 and second.version == first.version + 1


@pytest.mark.parametrize(
    ("content", "message"), [(None, "cannot read"), ("{", "neither JSON nor YAML")]
)
def test_an_unusable_file_is_an_input_error_naming_it(tmp_path, content, message):
    path = tmp_path / "cluster.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InputError, match=message) as caught:
        cluster_load(str(path))
    assert str(path) in str(caught.value)


@pytest.mark.cluster
def test_live_reads_the_watchers_snapshot_from_redis(
    control_plane, live_redis, cluster_name, names, run_watcher, live_settings
):
    node = names("n")
    node_create(api=control_plane.api, manifest=node_manifest(name=node))
    store = SnapshotStore(cluster_name, client=live_redis)
    run_watcher(client=LiveClient(kubeconfig=control_plane.kubeconfig), store=store)
    synced_reader(store)
    # The first list writes the snapshot a moment before the watcher reports "ok" (until then
    # the snapshot reads as stale: "the watcher is listing the cluster"), so wait for both.
    loaded = wait_until(
        lambda: (c := cluster_load("live")).state.node(node) and not c.stale and c,
        what="the node in a snapshot the watcher reports current",
    )
    assert loaded.source == "live" and loaded.label.startswith(f"live {cluster_name} v")
    assert loaded.stale is False and loaded.version >= 1


@pytest.mark.cluster
def test_without_a_watcher_live_lists_the_api_server_directly(
    control_plane, live_redis, names, live_settings
):
    node = names("direct")
    node_create(api=control_plane.api, manifest=node_manifest(name=node))
    live_settings(control_plane.kubeconfig)
    loaded = cluster_load("live")
    assert loaded.state.node(node) is not None
    assert "listed directly" in loaded.describe() and loaded.stale is False


@pytest.mark.cluster
def test_evaluate_works_against_the_live_test_cluster(
    control_plane, live_redis, names, live_settings, capsys
):
    node = names("eval")
    node_create(api=control_plane.api, manifest=node_manifest(name=node, cpu="8", memory="32Gi"))
    live_settings(control_plane.kubeconfig)
    call_command(
        "evaluate",
        policy=str(EXAMPLES / "least-allocated.yaml"),
        pod=str(EXAMPLES / "pods" / "web.yaml"),
        cluster="live",
        json=True,
    )
    result = json.loads(capsys.readouterr().out)
    assert "live" in result["cluster"]
    assert node in json.dumps(result)


def test_live_without_snapshot_or_kubeconfig_explains_both(live_redis, live_settings):
    with pytest.raises(
        ClusterUnavailable, match="listing it directly failed: config: no kubeconfig"
    ):
        cluster_load("live")


def test_the_extenders_live_snapshots_refresh_in_the_background_thread_only(
    live_redis, cluster_name
):
    from policies.cluster.state import ClusterState
    from policies.cluster.store import SnapshotWriter
    from tests.builders import make_node

    snapshots = live_snapshots(cluster_name)
    assert snapshots.current() is None  # nothing loaded until its thread refreshes
    SnapshotWriter(SnapshotStore(cluster_name, client=live_redis)).full(
        ClusterState.from_objects([make_node("x")], []), reset=True
    )
    assert snapshots.current() is None
    assert snapshots.refresh() is True
    assert snapshots.current().state.node("x") is not None


def test_the_extenders_live_snapshots_survive_redis_being_down(private_redis):
    from policies.cluster.reader import SnapshotReader
    from policies.cluster.sources import LiveSnapshots
    from policies.cluster.state import ClusterState
    from policies.cluster.store import SnapshotWriter
    from tests.builders import make_node

    client = private_redis.client()
    SnapshotWriter(SnapshotStore("x", client=client)).full(
        ClusterState.from_objects([make_node("x")], []), reset=True
    )
    snapshots = LiveSnapshots(SnapshotReader("x", client=client, stale_seconds=0))
    assert snapshots.refresh() is True
    private_redis.stop()
    assert snapshots.refresh() is False  # no exception reaches the extender's thread
    assert snapshots.last_error.startswith("redis:")
    assert snapshots.current().state.node("x") is not None
    assert snapshots.current().stale
