"""The node editor's form as what-if edits (policies/cluster/whatif_node.py): the edits a form's
changes make, applied by whatif.py, leave the node exactly as the form says; every wrong field
is named. Pure: the demo cluster in memory."""

from __future__ import annotations

import dataclasses

import pytest

from policies.cluster.sources import cluster_load
from policies.cluster.whatif import whatif_nodes
from policies.cluster.whatif_node import (
    MAX_ROWS,
    NodeForm,
    edits_text,
    node_form_edits,
    node_form_errors,
    node_form_from,
)


@pytest.fixture(scope="module")
def demo():
    return cluster_load("demo")


def form_of(cluster, name: str) -> NodeForm:
    return node_form_from(cluster.state.node(name)["object"])


def test_the_form_reads_labels_taints_cordon_and_allocatable_without_the_cordon_taint(demo):
    cordoned = whatif_nodes(cluster=demo, text="- cordon: a-spot-1\n")
    form = form_of(cordoned, "a-spot-1")
    assert form.unschedulable is True
    assert form.taints == [("cloud.example.com/spot", "true", "NoSchedule")]  # not the cordon's
    assert ("node-pool", "spot") in form.labels
    assert form.allocatable == {"cpu": "7910m", "memory": "29719102Ki", "pods": "110"}


def test_the_edits_of_a_changed_form_leave_the_node_as_the_form_says_and_copy_it(demo):
    before = form_of(demo, "cp-1")
    labels = dict(before.labels)
    del labels["node-role.kubernetes.io/control-plane"]
    labels |= {"topology.kubernetes.io/zone": "zone-b", "disk": "ssd", "example.com/empty": ""}
    after = dataclasses.replace(
        before,
        labels=sorted(labels.items()),
        taints=[("gpu", "true", "NoExecute"), ("dedicated", "", "PreferNoSchedule")],
        unschedulable=True,
        allocatable={"cpu": "4", "memory": "29719102Ki", "pods": "20"},
        copy_name="spare-1",
    )
    edits = node_form_edits(before, after)
    assert [next(iter(e)) for e in edits] == [
        "label",  # the control-plane label removed
        "label",  # disk
        "label",  # example.com/empty
        "label",  # the zone
        "untaint",
        "taint",
        "taint",
        "cordon",
        "allocatable",  # cpu and pods only: memory did not change
        "addNode",
    ]
    assert edits[8] == {"allocatable": {"node": "cp-1", "cpu": "4", "pods": "20"}}
    edited = whatif_nodes(cluster=demo, text=edits_text(edits))
    assert form_of(edited, "cp-1") == dataclasses.replace(after, copy_name="")
    copy = form_of(edited, "spare-1")
    assert dict(copy.labels)["kubernetes.io/hostname"] == "spare-1"
    assert (copy.taints, copy.unschedulable, copy.allocatable) == (
        after.taints,
        True,
        after.allocatable,
    )
    assert form_of(demo, "cp-1") == before  # the snapshot is never touched


def test_an_unchanged_form_makes_no_edit_and_the_text_is_one_flow_mapping_a_line(demo):
    before = form_of(demo, "b-large-1")
    assert node_form_edits(before, dataclasses.replace(before)) == []
    text = edits_text(
        [
            {"label": {"node": "b-large-1", "key": "disk", "value": "true"}},
            {"uncordon": "b-large-1"},
            {"allocatable": {"node": "b-large-1", "cpu": "8"}},
        ]
    )
    assert text == (
        "- label: {node: b-large-1, key: disk, value: 'true'}\n"
        "- uncordon: b-large-1\n"
        "- allocatable: {node: b-large-1, cpu: '8'}\n"
    )


@pytest.mark.parametrize(
    ("change", "errors"),
    [
        ({"labels": [("", "x")]}, {"labels[0].key": "required"}),
        ({"labels": [("a b", "x")]}, {"labels[0].key": "a key like disk or example.com/disk"}),
        ({"labels": [("Example.com/x", "")]}, {"labels[0].key": "a key like"}),
        ({"labels": [("a", "1"), ("a", "2")]}, {"labels[1].key": "a is already a label above"}),
        ({"labels": [("a", "x" * 64)]}, {"labels[0].value": "at most 63"}),
        ({"labels": [("a", "-x")]}, {"labels[0].value": "starting and ending alphanumeric"}),
        ({"taints": [("gpu", "", "Never")]}, {"taints[0].effect": "one of NoSchedule, "}),
        ({"taints": [("gpu", "a/b", "NoSchedule")]}, {"taints[0].value": "letters, digits"}),
        (
            {"taints": [("gpu", "", "NoSchedule"), ("gpu", "x", "NoSchedule")]},
            {"taints[1].key": "gpu:NoSchedule is already a taint above"},
        ),
        ({"allocatable": {"cpu": "lots"}}, {"cpu": "'lots': expected a number"}),
        ({"allocatable": {"memory": "-1Gi"}}, {"memory": "a quantity of 0 or more"}),
        ({"allocatable": {"pods": ""}}, {"pods": "a quantity of 0 or more"}),
        ({"copy_name": "Spare_1"}, {"copyName": "a node name"}),
        ({"copy_name": "b-large-2"}, {"copyName": "node b-large-2 exists already"}),
        ({"labels": [("a", "")] * (MAX_ROWS + 1)}, {"labels": f"at most {MAX_ROWS}"}),
    ],
)
def test_every_wrong_field_is_named_with_what_it_takes(demo, change, errors):
    form = dataclasses.replace(form_of(demo, "b-large-1"), **change)
    found = node_form_errors(form, existing={n["name"] for n in demo.state.nodes()})
    assert set(found) == set(errors)
    for path, start in errors.items():
        assert start in found[path], (path, found[path])


def test_a_form_with_every_field_wrong_reports_them_all_at_once(demo):
    form = NodeForm(
        name="b-large-1",
        labels=[("", "-")],
        taints=[("", "", "")],
        allocatable={"cpu": "x", "memory": "y"},
        copy_name="UPPER",
    )
    assert set(node_form_errors(form)) == {
        "labels[0].key",
        "labels[0].value",
        "taints[0].key",
        "taints[0].effect",
        "cpu",
        "memory",
        "copyName",
    }
