"""/api/v1/cluster* and /cluster/ over the demo and file sources (no API server needed), and the
live source without any snapshot or kubeconfig. Expected counts are computed from the demo
cluster itself, never copied from the implementation."""

from __future__ import annotations

import html
import json

import pytest

from policies.api.errors import CLUSTER_UNAVAILABLE
from policies.cluster.demo import ZONE_LABEL, demo_objects, demo_state

pytestmark = pytest.mark.urls("tests.cluster.urls")


@pytest.fixture
def demo(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    return demo_state()


def _all(client, path, **params):
    """Every result of a paginated endpoint (pages of 500)."""
    results, offset = [], 0
    while True:
        body = client.get(path, {**params, "limit": 500, "offset": offset}).json()
        results += body["results"]
        offset += 500
        if not body["next"]:
            return body, results


def test_the_status_of_the_demo_source_is_ok_and_counts_its_objects(viewer, demo):
    status = viewer.api.get("/api/v1/cluster").json()
    assert status["source"] == "demo"
    assert (status["available"], status["stale"], status["status"]) == (True, False, "ok")
    assert status["nodes"] == demo.node_count()
    assert status["pods"] == demo.pod_count()
    assert status["pendingPods"] == sum(
        1 for p in demo.pods() if not p["nodeName"] and p["phase"] == "Pending"
    )
    assert status["runs"] == []


@pytest.mark.parametrize(
    ("params", "keep"),
    [
        ({"zone": "zone-b"}, lambda n: n["labels"].get(ZONE_LABEL) == "zone-b"),
        ({"label": "gpu=true"}, lambda n: n["labels"].get("gpu") == "true"),
        # a key alone: the label exists (the control-plane role label has an empty value)
        (
            {"label": "node-role.kubernetes.io/control-plane"},
            lambda n: "node-role.kubernetes.io/control-plane" in n["labels"],
        ),
        ({"search": "SMALL"}, lambda n: "small" in n["name"]),
        (
            {"zone": "zone-a", "label": "node-pool=spot"},
            lambda n: (
                n["labels"].get(ZONE_LABEL) == "zone-a" and n["labels"].get("node-pool") == "spot"
            ),
        ),
    ],
)
def test_nodes_are_filtered_by_zone_label_and_name(viewer, demo, params, keep):
    body, results = _all(viewer.api, "/api/v1/cluster/nodes", **params)
    expected = [n["name"] for n in demo.nodes() if keep(n)]
    assert expected, "the demo cluster should have such nodes"
    assert [n["name"] for n in results] == expected
    assert body["count"] == len(expected)
    assert body["snapshot"] == {
        "source": "demo",
        "version": 1,
        "stale": False,
        "status": "ok",
        "error": "",
    }


def test_a_node_shows_the_engines_view_of_its_usage(viewer, demo):
    busiest = max(demo.nodes(), key=lambda n: n["podCount"])
    body = viewer.api.get("/api/v1/cluster/nodes", {"search": busiest["name"]}).json()
    (node,) = [n for n in body["results"] if n["name"] == busiest["name"]]
    # requested = sum over the non-terminated pods bound to it
    bound = [
        p
        for p in demo.pods()
        if p["nodeName"] == busiest["name"] and p["phase"] not in ("Succeeded", "Failed")
    ]
    assert node["podCount"] == len(bound)
    assert node["requested"]["cpu"] == sum(p["requests"]["cpu"] for p in bound)
    assert node["allocatable"] == dict(busiest["allocatable"])
    assert "object" not in node


@pytest.mark.parametrize(
    ("params", "keep"),
    [
        ({"namespace": "batch"}, lambda p: p["namespace"] == "batch"),
        ({"phase": "pending"}, lambda p: p["phase"] == "Pending"),
        ({"node": "b-gpu-2"}, lambda p: p["nodeName"] == "b-gpu-2"),
        (
            {"namespace": "web", "label": "tier=backend"},
            lambda p: p["namespace"] == "web" and p["labels"].get("tier") == "backend",
        ),
    ],
)
def test_pods_are_filtered_by_namespace_node_phase_and_label(viewer, demo, params, keep):
    body, results = _all(viewer.api, "/api/v1/cluster/pods", **params)
    expected = [(p["namespace"], p["name"]) for p in demo.pods() if keep(p)]
    assert expected
    assert [(p["namespace"], p["name"]) for p in results] == expected
    assert body["count"] == len(expected)


def test_lists_are_paginated(viewer, demo):
    first = viewer.api.get("/api/v1/cluster/pods", {"limit": 10}).json()
    second = viewer.api.get("/api/v1/cluster/pods", {"limit": 10, "offset": 10}).json()
    names = [(p["namespace"], p["name"]) for p in demo.pods()]
    assert [(p["namespace"], p["name"]) for p in first["results"] + second["results"]] == names[:20]
    assert first["count"] == len(names) and "offset=10" in first["next"]


@pytest.mark.parametrize("label", ["=x", "", "=", "a\x00b"])
def test_a_malformed_label_filter_is_a_400_naming_it(viewer, demo, label):
    response = viewer.api.get("/api/v1/cluster/nodes", {"label": label})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid"
    assert "label" in response.json()["detail"]  # the filter, or the query parameter (NUL)


def test_the_cluster_api_needs_a_viewer(db, demo):
    from rest_framework.test import APIClient

    from tests.conftest import make_user, token_client

    assert APIClient().get("/api/v1/cluster").status_code == 401
    nobody = token_client(make_user("no-role", None))
    for path in ("/api/v1/cluster", "/api/v1/cluster/nodes", "/api/v1/cluster/pods"):
        response = nobody.get(path)
        assert response.status_code == 403
        assert "viewer role" in response.json()["detail"]


def test_the_page_shows_nodes_and_pods_as_the_engine_sees_them(viewer, demo):
    response = viewer.browser.get("/cluster/", {"zone": "zone-c", "namespace": "ml"})
    assert response.status_code == 200
    page = html.unescape(response.content.decode())
    assert 'id="nodes"' in page and "data-sortable" in page and 'data-filter-table="#nodes"' in page
    zone_c = [n["name"] for n in demo.nodes() if n["labels"].get(ZONE_LABEL) == "zone-c"]
    others = [n["name"] for n in demo.nodes() if n["labels"].get(ZONE_LABEL) != "zone-c"]
    nodes_table = page[page.index('id="nodes"') : page.index("</table>", page.index('id="nodes"'))]
    assert all(f">{name}<" in nodes_table for name in zone_c)
    assert not any(f">{name}<" in nodes_table for name in others)
    ml = [p["name"] for p in demo.pods() if p["namespace"] == "ml"]
    assert ml and all(name in page for name in ml)
    assert "The snapshot is stale" not in page


def test_the_page_pages_long_tables_and_keeps_the_filters(viewer, settings, tmp_path):
    # 250 pods on one node: page 1 shows 1-200, page 2 shows 201-250
    nodes, pods = demo_objects()
    bound = [
        dict(p, metadata={**p["metadata"], "name": f"x-{i:03d}", "uid": f"x-{i}"})
        for i, p in enumerate([pods[0]] * 250)
    ]
    path = tmp_path / "cluster.json"
    path.write_text(
        json.dumps(
            {
                "kind": "List",
                "items": [{"kind": "Node", **n} for n in nodes]
                + [{"kind": "Pod", **p} for p in bound],
            }
        )
    )
    settings.SCHEDWEB_CLUSTER_SOURCE = "file"
    settings.SCHEDWEB_CLUSTER_FILE = path
    first = html.unescape(
        viewer.browser.get(
            "/cluster/", {"namespace": pods[0]["metadata"]["namespace"]}
        ).content.decode()
    )
    assert "1\u2013200 of 250" in first and ">x-199<" in first and ">x-200<" not in first
    assert "pods_page=2" in first and "namespace=" in first
    second = html.unescape(
        viewer.browser.get(
            "/cluster/", {"namespace": pods[0]["metadata"]["namespace"], "pods_page": 2}
        ).content.decode()
    )
    assert "201\u2013250 of 250" in second and ">x-200<" in second
    status = viewer.api.get("/api/v1/cluster").json()
    assert (
        status["source"] == "file" and status["label"] == f"file {path}" and status["pods"] == 250
    )


def test_the_page_needs_a_login_and_a_role(db, demo, client):
    from tests.conftest import make_user

    response = client.get("/cluster/")
    assert response.status_code == 302 and "/login/" in response["Location"]
    client.force_login(make_user("no-role", None))
    response = client.get("/cluster/")
    assert response.status_code == 403
    assert "viewer role" in response.content.decode()


def test_live_without_a_snapshot_or_a_kubeconfig_answers_503_with_the_reason(
    viewer, live_redis, live_settings
):
    status = viewer.api.get("/api/v1/cluster").json()
    assert status["available"] is False and status["source"] == "live"
    assert "SCHEDWEB_KUBECONFIG is unset" in status["error"]
    response = viewer.api.get("/api/v1/cluster/nodes")
    assert response.status_code == 503
    # what to do, not how the server is configured (issue 27): the reason is in the status above
    assert response.json() == {"error": "cluster_unavailable", "detail": CLUSTER_UNAVAILABLE}
    assert response["Retry-After"] == "5"


def test_the_gang_mode_is_unknown_off_a_live_cluster(viewer, demo):
    mode = viewer.api.get("/api/v1/cluster").json()["gangMode"]
    assert mode == {
        "mode": "unknown",
        "reason": "a demo cluster has no API server to ask",
        "checkedAt": None,
    }


@pytest.mark.parametrize(
    ("mode", "shown"),
    [("workload", "all or nothing"), ("hold", "held until complete")],
)
def test_the_api_and_the_page_say_which_gang_mode_the_worker_detected(
    viewer, live_redis, live_settings, mode, shown
):
    from policies.gangs import gang_mode_record

    gang_mode_record(mode, "detected for this test")
    status = viewer.api.get("/api/v1/cluster").json()
    assert status["gangMode"]["mode"] == mode
    assert status["gangMode"]["reason"] == "detected for this test"
    assert status["gangMode"]["checkedAt"] is not None
    page = html.unescape(viewer.browser.get("/cluster/").content.decode())
    assert f'id="gang-mode" data-mode="{mode}"' in page and shown in page
