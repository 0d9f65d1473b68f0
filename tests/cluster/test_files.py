"""The `file` source: kubectl output in its shapes, JSON and YAML, and every error."""

from __future__ import annotations

import json

import pytest
import yaml

from policies.cluster.files import ClusterFileError, load_cluster_file
from tests.builders import make_node, make_pod


def objects():
    return [make_node("n1"), make_pod("p1", cpu="250m", node_name="n1"), make_pod("p2")]


def write(tmp_path, name: str, content) -> str:
    path = tmp_path / name
    if isinstance(content, bytes | str):
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    else:
        path.write_text(json.dumps(content))
    return str(path)


def check_loaded(state) -> None:
    """n1 with p1 (250m) bound, p2 pending."""
    assert [n["name"] for n in state.nodes()] == ["n1"]
    assert sorted(p["name"] for p in state.pods()) == ["p1", "p2"]
    assert (state.node("n1")["requested"]["cpu"], state.node("n1")["podCount"]) == (250, 1)


def test_it_loads_kubectl_get_nodes_pods_json(tmp_path):
    path = write(tmp_path, "cluster.json", {"apiVersion": "v1", "kind": "List", "items": objects()})
    check_loaded(load_cluster_file(path))


def test_it_loads_node_and_pod_lists_whose_items_have_no_kind(tmp_path):
    nodes, *pods = objects()
    for obj in (nodes, *pods):
        del obj["kind"]
    docs = [{"kind": "NodeList", "items": [nodes]}, {"kind": "PodList", "items": pods}]
    path = write(tmp_path, "lists.yaml", yaml.safe_dump_all(docs))
    check_loaded(load_cluster_file(path))


def test_it_loads_a_plain_json_list(tmp_path):
    check_loaded(load_cluster_file(write(tmp_path, "plain.json", objects())))


def test_it_loads_yaml(tmp_path):
    path = write(tmp_path, "cluster.yaml", yaml.safe_dump({"kind": "List", "items": objects()}))
    check_loaded(load_cluster_file(path))


def test_it_loads_a_yaml_stream_of_single_objects(tmp_path):
    check_loaded(load_cluster_file(write(tmp_path, "stream.yaml", yaml.safe_dump_all(objects()))))


def test_it_skips_objects_of_other_kinds(tmp_path):
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    path = write(tmp_path, "all.json", {"kind": "List", "items": [deployment, *objects()]})
    check_loaded(load_cluster_file(path))


def test_it_keeps_the_namespaces_services_and_controllers_kube_scheduler_reads(tmp_path):
    extra = [
        {"kind": "Namespace", "metadata": {"name": "web", "labels": {"team": "shop"}}},
        {
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "web"},
            "spec": {"selector": {"app": "web"}},
        },
        {
            "kind": "ReplicaSet",
            "metadata": {"name": "web-1", "namespace": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {}},
        },
    ]
    state = load_cluster_file(
        write(tmp_path, "all.json", {"kind": "List", "items": [*extra, *objects()]})
    )
    check_loaded(state)
    assert state.namespaces() == {"web": {"team": "shop"}}
    assert state.services("web") == ({"app": "web"},)
    assert state.controller("ReplicaSet", "web", "web-1")["selector"] == {
        "matchLabels": {"app": "web"},
        "matchExpressions": [],
    }


def test_an_empty_list_is_an_empty_cluster(tmp_path):
    state = load_cluster_file(write(tmp_path, "empty.json", {"kind": "List", "items": []}))
    assert (state.node_count(), state.pods()) == (0, [])


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("", "the file is empty"),
        ("  \n", "the file is empty"),
        ("items: [unclosed", "neither JSON nor YAML at line 2, column 1: did not find expected ',' or ']'"),
        ("---\n...\n", "the file holds no document"),
        ('"just a string"', "expected a List of Nodes and Pods (kubectl get nodes,pods -A -o json), got a string"),
        ("{}", "expected a List of Nodes and Pods (kubectl get nodes,pods -A -o json), got an object without kind or items"),
        ('{"items": []}', "a list without a kind (expected List, NodeList or PodList)"),
        ('{"kind": "List", "items": {"a": 1}}', "List.items is not a list"),
        ('[{"kind": "Node", "metadata": {"name": "n1"}}, {"metadata": {"name": "x"}}]',
         "item 1: has no kind (expected Node or Pod)"),
        ('{"kind": "List", "items": [42]}', "item 0: expected an object, got int"),
        ('{"kind": "PodList", "items": [{"metadata": {"name": "p"}}, {"spec": {}}]}',
         "item 1: pod: metadata: missing or not an object"),
    ],
)  # fmt: skip
def test_it_names_the_file_and_problem(tmp_path, content, problem):
    path = write(tmp_path, "bad.json", content)
    with pytest.raises(ClusterFileError) as caught:
        load_cluster_file(path)
    assert str(caught.value) == f"{path}: {problem}"


def test_it_names_the_item_and_field_of_a_conversion_error(tmp_path):
    bad = make_pod("web-1", cpu="10x")
    path = write(
        tmp_path, "bad.json", {"kind": "List", "items": [make_node("n1"), make_pod("ok"), bad]}
    )
    with pytest.raises(ClusterFileError) as caught:
        load_cluster_file(path)
    assert str(caught.value) == (
        f"{path}: item 2: pod default/web-1: spec.containers[0].resources.requests.cpu: "
        'invalid quantity "10x"'
    )


def test_a_missing_file_is_a_cluster_file_error(tmp_path):
    path = tmp_path / "nope.json"
    with pytest.raises(ClusterFileError, match=r"nope\.json: cannot read: No such file"):
        load_cluster_file(path)


def test_a_directory_is_a_cluster_file_error(tmp_path):
    with pytest.raises(ClusterFileError, match="cannot read"):
        load_cluster_file(tmp_path)
