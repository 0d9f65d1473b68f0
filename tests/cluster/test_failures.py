"""When the API server cannot be used - a wrong token (401), a token without RBAC (403), a
closed port, a stopped API server - the status says so in plain words in the API and on the
page, the last good snapshot stays (marked stale), and no empty cluster is shown as real."""

from __future__ import annotations

import html

import pytest

from policies.api.errors import CLUSTER_UNAVAILABLE
from policies.cluster.live import LiveClient
from policies.cluster.store import SnapshotStore
from tests.harness.resources import node_create, node_manifest

from .conftest import apiserver_stop, closed_port_kubeconfig, synced_reader, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.urls("tests.cluster.urls")]

UNAUTHORIZED = "unauthorized: the API server rejected the credentials"
FORBIDDEN = (
    "forbidden: the account needs list and watch on nodes, pods, namespaces, services,"
    " replicationcontrollers, and apps replicasets and statefulsets (RBAC)"
)
UNREACHABLE = "unreachable: cannot connect to https://127.0.0.1:"


def _bad_kubeconfig(control_plane, who, tmp_path):
    if who == "wrong-token":
        return control_plane.kubeconfig_for("a-token-the-server-never-issued")
    if who == "limited":
        return control_plane.kubeconfig_for(control_plane.limited_token)
    return closed_port_kubeconfig(control_plane, tmp_path)


def _good_snapshot(control_plane, store, node, run_watcher):
    """A snapshot holding `node`, written by a watcher that then stops."""
    node_create(api=control_plane.api, manifest=node_manifest(name=node))
    good = run_watcher(client=LiveClient(kubeconfig=control_plane.kubeconfig), store=store)
    reader = synced_reader(store)
    wait_until(
        lambda: reader.refresh() or reader.current.state.node(node), what="the good snapshot"
    )
    good.stop()
    return reader


def _assert_shown_stale(viewer, node, message):
    """The API status, the node list and the page all show the stale snapshot and why."""
    status = viewer.api.get("/api/v1/cluster").json()
    assert status["available"] is True
    assert status["stale"] is True
    assert status["status"] == "error"
    assert status["error"].startswith(message)
    assert status["nodes"] >= 1
    listed = viewer.api.get("/api/v1/cluster/nodes", {"search": node}).json()
    assert [n["name"] for n in listed["results"]] == [node]
    assert listed["snapshot"]["stale"] is True
    page = viewer.browser.get("/cluster/")
    assert page.status_code == 200
    text = html.unescape(page.content.decode())
    assert "The snapshot is stale" in text
    assert message in text
    assert node in text


@pytest.mark.parametrize(
    ("who", "message"),
    [("wrong-token", UNAUTHORIZED), ("limited", FORBIDDEN), ("closed-port", UNREACHABLE)],
)
def test_a_watcher_that_cannot_use_the_api_server_keeps_the_last_snapshot_stale_and_says_why(
    control_plane,
    live_redis,
    cluster_name,
    names,
    run_watcher,
    tmp_path,
    viewer,
    live_settings,
    who,
    message,
):
    store = SnapshotStore(cluster_name, client=live_redis)
    node = names("kept")
    reader = _good_snapshot(control_plane, store, node, run_watcher)
    # The next run of the watch task, e.g. after the token was rotated or the address changed.
    bad = _bad_kubeconfig(control_plane, who, tmp_path)
    run_watcher(client=LiveClient(kubeconfig=bad), store=store)
    wait_until(
        lambda: reader.refresh() or reader.current.error.startswith(message),
        what=f"the status {message!r}",
    )
    assert reader.current.stale and reader.current.state.node(node)
    live_settings(bad)
    _assert_shown_stale(viewer, node, message)


def test_a_stopped_api_server_leaves_the_snapshot_stale_with_the_reason(
    private_plane, live_redis, cluster_name, run_watcher, viewer, live_settings
):
    store = SnapshotStore(cluster_name, client=live_redis)
    reader = _good_snapshot(private_plane, store, "before-the-stop", run_watcher)
    running = run_watcher(client=LiveClient(kubeconfig=private_plane.kubeconfig), store=store)
    wait_until(lambda: reader.refresh() or reader.current.status == "ok", what="a healthy watch")
    url = private_plane.url
    apiserver_stop(private_plane)
    expected = f"unreachable: cannot connect to {url}: connection refused"
    wait_until(
        lambda: reader.refresh() or reader.current.error == expected,
        what=f"the status {expected!r}",
    )
    assert reader.current.state.node("before-the-stop")
    assert running.watcher.result().status == "error"
    _assert_shown_stale(viewer, "before-the-stop", expected)


def test_without_any_snapshot_nothing_is_shown_as_a_cluster_and_the_reason_is_given(
    control_plane, live_redis, cluster_name, run_watcher, viewer, live_settings
):
    store = SnapshotStore(cluster_name, client=live_redis)
    bad = control_plane.kubeconfig_for("a-token-the-server-never-issued")
    run_watcher(client=LiveClient(kubeconfig=bad), store=store)
    wait_until(lambda: store.meta_read().get("status") == "error", what="the watcher's error")
    live_settings(bad)
    status = viewer.api.get("/api/v1/cluster").json()
    assert status["available"] is False
    assert (status["nodes"], status["pods"], status["version"]) == (None, None, None)
    assert UNAUTHORIZED in status["error"]
    for path in ("/api/v1/cluster/nodes", "/api/v1/cluster/pods"):
        response = viewer.api.get(path)
        assert response.status_code == 503
        # a viewer is told what to do; why (the credentials) is for the log and admins (issue 27)
        assert response.json() == {"error": "cluster_unavailable", "detail": CLUSTER_UNAVAILABLE}
    page = html.unescape(viewer.browser.get("/cluster/").content.decode())
    assert "No cluster snapshot" in page and UNAUTHORIZED in page
    assert 'id="nodes"' not in page


def test_a_watcher_that_keeps_failing_keeps_its_reason_between_retries(
    control_plane, live_redis, cluster_name, run_watcher
):
    """Each retry lists again; the status must not fall back to "starting" with no reason."""
    store = SnapshotStore(cluster_name, client=live_redis)
    bad = control_plane.kubeconfig_for("a-token-the-server-never-issued")
    running = run_watcher(
        client=LiveClient(kubeconfig=bad), store=store, backoff_base=0.05, backoff_cap=0.1
    )
    wait_until(lambda: store.meta_read().get("status") == "error", what="the watcher's error")
    seen = set()
    first = running.watcher._sync_failures

    def retried_and_recorded() -> bool:
        meta = store.meta_read()
        seen.add((meta.get("status"), meta.get("error")))
        return running.watcher._sync_failures >= first + 5

    wait_until(retried_and_recorded, what="five more failed lists")
    assert seen == {("error", UNAUTHORIZED)}
