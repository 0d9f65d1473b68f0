"""LiveClient against the real kube-apiserver: raw-JSON lists in pages, watches, binding, and
failures classified in plain words without leaking the token."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from policies.cluster import live
from policies.cluster.live import Gone, KubeError, LiveClient, WatchStream
from tests.harness.resources import (
    node_create,
    node_manifest,
    node_relabel,
    pod_create,
    pod_get,
    pod_manifest,
)

from .conftest import closed_port_kubeconfig

pytestmark = pytest.mark.cluster


def test_it_lists_every_node_in_pages_as_raw_json(control_plane, names):
    created = {names(f"n{i}") for i in range(5)}
    for name in created:
        node_create(api=control_plane.api, manifest=node_manifest(name=name))
    # page_size 2: at least 3 pages for our 5 nodes alone
    listing = LiveClient(kubeconfig=control_plane.kubeconfig, page_size=2).list_nodes()
    listed = [item["metadata"]["name"] for item in listing.items]
    assert created <= set(listed)
    assert len(listed) == len(set(listed))  # no page repeated an item
    expected = control_plane.api.get("/api/v1/nodes")["items"]
    assert len(listed) == len(expected)
    assert int(listing.resource_version) > 0
    assert isinstance(listing.items[0]["status"]["capacity"], dict)  # plain dicts, not models


def test_it_lists_pods_of_every_namespace(control_plane, names):
    pod_create(
        api=control_plane.api, manifest=pod_manifest(name=names("p"), namespace="kube-system")
    )
    pods = LiveClient(kubeconfig=control_plane.kubeconfig).list_pods().items
    assert names("p") in {
        (p["metadata"]["name"]) for p in pods if p["metadata"]["namespace"] == "kube-system"
    }


def test_a_watch_yields_events_after_the_lists_version_and_close_ends_it(control_plane, names):
    name = names("w")
    node_create(api=control_plane.api, manifest=node_manifest(name=name))
    client = LiveClient(kubeconfig=control_plane.kubeconfig)
    rv = client.list_nodes().resource_version
    stream = client.watch("nodes", resource_version=rv, timeout_seconds=30)
    threading.Timer(
        0.2, lambda: node_relabel(api=control_plane.api, name=name, labels={"team": "a"})
    ).start()
    seen = None
    for event_type, obj in stream:
        if obj["metadata"].get("name") == name:
            seen = event_type, obj["metadata"]["labels"].get("team")
            break
    assert seen == ("MODIFIED", "a")
    # close() from another thread ends a blocked read, without an error: the server holds this
    # watch open for an hour, so a read that ends at all was ended by close()
    stream = client.watch("nodes", resource_version=rv, timeout_seconds=3600)
    reading_on = threading.Event()
    ended: list[str] = []

    def read_all() -> None:
        for _event in stream:  # the relabel above comes first, then the read blocks
            reading_on.set()
        ended.append("without an error")

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    assert reading_on.wait(timeout=60), "the watch never yielded the relabel"
    stream.close()
    reader.join(timeout=60)
    assert not reader.is_alive(), "close() did not end the watch's read"
    assert ended == ["without an error"]


@pytest.mark.parametrize(
    ("who", "kind", "message"),
    [
        ("wrong-token", "unauthorized", "unauthorized: the API server rejected the credentials"),
        (
            "limited",
            "forbidden",
            "forbidden: the account needs list and watch on nodes, pods, namespaces, services,"
            " replicationcontrollers, and apps replicasets and statefulsets (RBAC)",
        ),
        ("closed-port", "unreachable", "unreachable: cannot connect to https://127.0.0.1:"),
        ("unknown-ca", "unreachable", "unreachable: cannot connect to https://127.0.0.1:"),
        (
            "unknown-host",
            "unreachable",
            "unreachable: cannot connect to https://no-such-host.invalid:6443: unknown host (DNS)",
        ),
        ("no-file", "config", "config: no kubeconfig file at"),
    ],
)
def test_failures_are_classified_in_plain_words_without_the_token(
    control_plane, tmp_path, who, kind, message
):
    token = {
        "wrong-token": "not-a-valid-token-0123456789",
        "limited": control_plane.limited_token,
    }.get(who)
    if who == "closed-port":
        path = closed_port_kubeconfig(control_plane, tmp_path)
        token = control_plane.admin_token
    elif who in ("unknown-ca", "unknown-host"):
        text = control_plane.kubeconfig.read_text()
        if who == "unknown-ca":  # the system bundle does not hold the test cluster's own CA
            text = text.replace(str(control_plane.ca_file), "/etc/ssl/certs/ca-certificates.crt")
        else:
            text = text.replace(control_plane.url, "https://no-such-host.invalid:6443")
        path = tmp_path / who
        path.write_text(text)
        token = control_plane.admin_token
    elif who == "no-file":
        path = tmp_path / "missing"
    else:
        path = control_plane.kubeconfig_for(token)
    client = LiveClient(kubeconfig=path)
    for call in (
        client.list_nodes,
        lambda: client.watch("pods", resource_version="0", timeout_seconds=5),
    ):
        with pytest.raises(KubeError) as caught:
            call()
        assert caught.value.kind == kind
        assert str(caught.value).startswith(message)
        if token:
            assert token not in str(caught.value)
    ending = {
        "closed-port": "connection refused",
        "unknown-ca": "TLS certificate verification failed",
    }
    if who in ending:
        assert str(caught.value).endswith(ending[who])


def test_a_410_error_event_raises_gone_and_others_keep_their_status():
    client = LiveClient()
    lines = [
        b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}}\n',
        b'{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired",'
        b'"message":"too old resource version: 1 (5)"}}\n',
    ]
    response = SimpleNamespace(stream=lambda *a, **k: iter(lines), release_conn=lambda: None)
    events = iter(WatchStream(response, kind="nodes", client=client))
    assert next(events)[0] == "ADDED"
    with pytest.raises(Gone, match="too old resource version"):
        next(events)
    lines[1] = b'{"type":"ERROR","object":{"kind":"Status","code":500,"message":"etcd down"}}\n'
    with pytest.raises(KubeError, match="HTTP 500: etcd down"):
        list(WatchStream(response, kind="nodes", client=client))


def test_a_watch_event_split_over_chunks_is_reassembled():
    chunks = [
        b'{"type":"ADDED","obj',
        b'ect":{"metadata":{"name":"a"}}}\n{"type":"DEL',
        b'ETED","object":{"metadata":{"name":"b"}}}\n',
    ]
    response = SimpleNamespace(stream=lambda *a, **k: iter(chunks), release_conn=lambda: None)
    events = list(WatchStream(response, kind="nodes", client=LiveClient()))
    assert [(t, o["metadata"]["name"]) for t, o in events] == [("ADDED", "a"), ("DELETED", "b")]


def test_bind_places_a_pod_and_a_stale_uid_is_refused(control_plane, names, monkeypatch):
    node, pod = names("bn"), names("bp")
    node_create(api=control_plane.api, manifest=node_manifest(name=node))
    created = pod_create(api=control_plane.api, manifest=pod_manifest(name=pod))
    monkeypatch.setattr(live, "_binder", LiveClient(kubeconfig=control_plane.kubeconfig))
    args = SimpleNamespace(pod_namespace="default", pod_name=pod, pod_uid="not-the-uid", node=node)
    error = live.bind_pod(args)
    assert error.startswith(
        f"binding default/{pod} to {node} failed: error: the API server answered HTTP 409"
    )
    args.pod_uid = created["metadata"]["uid"]
    assert live.bind_pod(args) == ""
    assert pod_get(api=control_plane.api, name=pod)["spec"]["nodeName"] == node
