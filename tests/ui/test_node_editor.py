"""The playground's node editor (policies/ui/node_editor.py): the form shows a node as the
preview sees it, a wrong field is named beside it, and an applied form answers the what-if lines
the page appends; the preview of the text with them shows the node as the form said."""

from __future__ import annotations

import json
import re

import pytest

from policies import services
from policies.cluster.sources import cluster_load
from policies.cluster.whatif import whatif_nodes
from policies.cluster.whatif_node import node_form_from
from tests.conftest import client_for, make_user

from .test_policy_pages import example

pytestmark = pytest.mark.django_db
URL = "/policies/seed-003-name-length/node-edit"
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def seed003(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"
    services.policy_create(
        actor=make_user("ed", "editor"), document=example("seed-003-name-length")
    )


@pytest.fixture
def viewer():
    return client_for("viewer")


def _form(node: str, **fields) -> dict:
    """The form as the page posts it: the node's current values, then `fields` over them."""
    form = node_form_from(cluster_load("demo").state.node(node)["object"])
    data = {
        "action": "apply",
        "node": node,
        "label_key": [k for k, _ in form.labels],
        "label_value": [v for _, v in form.labels],
        "taint_key": [t[0] for t in form.taints],
        "taint_value": [t[1] for t in form.taints],
        "taint_effect": [t[2] for t in form.taints],
        **form.allocatable,
        **({"unschedulable": "on"} if form.unschedulable else {}),
    }
    return data | fields


def test_the_form_shows_the_node_as_the_preview_sees_it_what_if_edits_included(viewer):
    page = viewer.post(
        URL, {"action": "open", "node": "a-spot-1", "what_if": "- cordon: a-spot-1"}, **HTMX
    ).content.decode()
    assert 'id="node-editor-form"' in page and 'Edit node <span class="mono">a-spot-1' in page
    assert 'name="label_key" value="node-pool"' in page
    assert 'name="taint_key" value="cloud.example.com/spot"' in page
    assert 'name="unschedulable" id="ne-unschedulable" checked' in page
    assert 'name="cpu" value="7910m"' in page
    assert "node.kubernetes.io/unschedulable" not in page  # the cordon's taint is the checkbox


def test_an_applied_form_answers_the_lines_that_make_the_node_what_it_says(viewer):
    posted = _form(
        "b-large-1",
        label_key=["node-pool", "disk"],
        label_value=["batch", "ssd"],
        taint_key=["gpu"],
        taint_value=["true"],
        taint_effect=["NoSchedule"],
        unschedulable="on",
        cpu="8",
        copy_name="spare-1",
    )
    answer = viewer.post(URL, posted, **HTMX)
    assert answer.status_code == 200, answer.content
    found = re.search(
        r'<script id="node-editor-edits" type="application/json">(.*?)</script>',
        answer.content.decode(),
    )
    text = json.loads(found.group(1))
    edited = whatif_nodes(cluster=cluster_load("demo"), text=text)
    node = node_form_from(edited.state.node("b-large-1")["object"])
    assert node.labels == [("disk", "ssd"), ("node-pool", "batch")]
    assert (node.taints, node.unschedulable, node.allocatable["cpu"]) == (
        [("gpu", "true", "NoSchedule")],
        True,
        "8",
    )
    assert edited.state.node("spare-1") is not None
    assert text.splitlines()[-1] == "- addNode: {name: spare-1, like: b-large-1}"


def test_a_wrong_field_is_named_beside_it_and_nothing_is_answered_to_append(viewer):
    posted = _form("b-large-1", label_key=["bad key"], label_value=["x"], cpu="lots")
    answer = viewer.post(URL, posted, **HTMX)
    page = answer.content.decode()
    assert answer.status_code == 422
    assert "node-editor-edits" not in page
    assert "2 fields to correct below." in page
    assert "Label 1 key: a key like disk or example.com/disk" in page
    assert 'aria-label="Label 1 key" autocomplete="off" spellcheck="false" aria-invalid="true"' in (
        page
    )
    assert "cpu: &#x27;lots&#x27;: expected a number" in page
    assert 'value="bad key"' in page  # the user's input is kept


@pytest.mark.parametrize(
    ("fields", "status", "message"),
    [
        ({"node": "no-such"}, 422, "No node named no-such in the previewed cluster."),
        ({"what_if": "- cordon: no-such"}, 422, "whatIf[0].cordon: no node named no-such"),
        ({"what_if": "[unclosed"}, 422, "whatIf: not valid YAML"),
        ({}, 422, "Nothing changed: edit a field, then apply."),
        ({"what_if": "- uncordon: b-large-1\n" * 50}, 422, "would hold more than 50 edits"),
    ],
)
def test_what_cannot_be_used_is_said_in_the_dialog_never_a_500(viewer, fields, status, message):
    posted = _form("b-large-1", **({"cpu": "9"} if "what_if" in fields else {})) | fields
    answer = viewer.post(URL, posted, **HTMX)
    assert answer.status_code == status
    assert message in answer.content.decode()


def test_the_node_editor_needs_a_signed_in_user_and_an_existing_policy(client, viewer):
    assert client.post(URL, {"action": "open", "node": "b-large-1"}).status_code in (302, 403)
    missing = viewer.post("/policies/nope/node-edit", {"action": "open", "node": "b-large-1"})
    assert missing.status_code == 404


def test_the_table_and_the_drill_down_offer_to_edit_each_node(viewer):
    page = viewer.get("/policies/seed-003-name-length/").content.decode()
    assert 'class="pg-node-edit" data-edit-node="b-large-1"' in page
    assert 'class="btn btn--sm pg-drill-edit" data-edit-node="b-large-1"' in page
    assert '<dialog id="node-editor"' in page


def test_more_rows_than_a_node_carries_are_refused_in_words(viewer):
    keys = [f"k{i}" for i in range(101)]
    answer = viewer.post(URL, _form("b-large-1", label_key=keys, label_value=keys), **HTMX)
    assert answer.status_code == 422
    assert '<p class="field-error">Labels: at most 100</p>' in answer.content.decode()
