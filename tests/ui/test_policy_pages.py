"""The policy pages: list, playground and its live preview, saving, test cases, publishing,
rollback, the diff and the background preview of all pending pods.

Status codes, login redirects, role refusals (403 with a sentence), the fragments htmx swaps,
and the errors users see in words (409, 412, 422). Expected values are computed from the demo
cluster and the engine, never copied from the views.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml
from django.contrib.auth.models import User
from django.test import Client

from policies import preview_jobs as jobs
from policies import services
from policies.cluster.manifest import pod_view_from_text
from policies.cluster.sources import cluster_load
from policies.engine.cel.deadline import deadline
from policies.engine.document import FieldError
from policies.engine.policy import compile_policy, validate_policy
from policies.evaluation import test_cases_run as run_test_cases
from policies.models import Policy, PolicyTestCase, PolicyVersion
from policies.redis import redis_client
from policies.tasks.previews import preview_all_pending
from policies.ui.diff import side_by_side
from policies.ui.forms import document_with_name
from policies.ui.markers import error_markers
from tests.clocks import StepClock
from tests.conftest import make_user
from tests.redisdb import redis_database

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"
HTMX = {"HTTP_HX_REQUEST": "true"}


def example(name: str) -> str:
    return (EXAMPLES / f"{name}.yaml").read_text()


def example_pod(name: str) -> str:
    return (EXAMPLES / "pods" / f"{name}.yaml").read_text()


@pytest.fixture(autouse=True)
def demo_cluster(settings):
    """Every preview here runs on the bundled demo cluster (36 nodes, 7 pending pods)."""
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"


@pytest.fixture
def users(db) -> dict[str, User]:
    return {r: make_user(r, r) for r in ("viewer", "editor", "publisher", "admin")} | {
        "nobody": make_user("nobody", None)
    }


@pytest.fixture
def clients(users) -> dict[str, Client]:
    found = {}
    for role, user in users.items():
        client = Client()
        client.force_login(user)
        found[role] = client
    return found


@pytest.fixture
def seed003(users) -> Policy:
    """seed-003: a pod name of at most 4 characters; the shortest node name wins (cp-1)."""
    return services.policy_create(actor=users["editor"], document=example("seed-003-name-length"))


@pytest.fixture
def isolated_redis(settings):
    with redis_database(settings, 10) as client:
        yield client


def demo_names() -> list[str]:
    return [n["name"] for n in cluster_load("demo").nodes()]


def shortest_node() -> str:
    """The unique shortest node name of the demo cluster (cp-1: seed-003's top score over
    every node, which kube-scheduler never picks: it is a tainted control-plane node)."""
    names = demo_names()
    best = min(names, key=len)
    assert sum(len(n) == len(best) for n in names) == 1
    return best


def kube_pick(document: str, pod: str = "default/abc") -> list[str]:
    """kube-scheduler's pick (its tie group) for a demo pod with `document` served, as the
    model predicts it under the default profile (computed, not copied from the views)."""
    from policies.cluster.loaded import pod_from_cluster
    from policies.evaluation import preview_run

    cluster = cluster_load("demo")
    namespace, name = pod.split("/")
    found = pod_from_cluster(cluster=cluster, namespace=namespace, name=name)
    return list(preview_run(document=document, pod=found, cluster=cluster).placement.pick)


def cp1_scores_more(document: str) -> str:
    """seed-003 with one line changed: cp-1 scores 10 more. Over every node the policy's
    totals all change (minmax over 3..26 instead of 3..16: 26 of 36 totals move), but cp-1 is
    tainted, so kube-scheduler never sends it to the extender: no pod moves."""
    changed = document.replace(
        "expression: 20 - size(node.name)",
        """expression: '20 - size(node.name) + (node.name == "cp-1" ? 10 : 0)'""",
    )
    assert changed.count("\n") == document.count("\n") and changed != document
    return changed


def pending_pods() -> list[str]:
    return sorted(
        f"{p['namespace']}/{p['name']}"
        for p in cluster_load("demo").state.pods()
        if not p["nodeName"] and p["phase"] == "Pending"
    )


def markers_of(html: str) -> list[dict]:
    found = re.search(r'data-cel-markers-for="policy-editor"[^>]*>(.*?)</script>', html, re.S)
    assert found, "the answer carries the editor's markers"
    return json.loads(found.group(1))


def position(text: str, needle: str) -> tuple[int, int]:
    """1-based (line, column) of `needle` in `text`."""
    at = text.index(needle)
    return text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1


# --- access -----------------------------------------------------------------------------------


PAGES = [
    "/policies/",
    "/policies/seed-003-name-length/",
    "/policies/seed-003-name-length/versions/",
    "/policies/seed-003-name-length/tests/",
    "/policies/seed-003-name-length/versions/draft/diff/draft",
]


@pytest.mark.parametrize("url", PAGES)
def test_pages_send_anonymous_users_to_the_login_page(client, seed003, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


def test_an_htmx_request_without_a_session_is_redirected_by_header(client, seed003):
    response = client.post("/policies/seed-003-name-length/preview", {"document": "x"}, **HTMX)
    assert response.status_code == 204
    assert response["HX-Redirect"].startswith("/login/?next=")


@pytest.mark.parametrize("url", PAGES)
def test_a_user_without_a_role_is_refused_with_a_sentence(clients, seed003, url):
    response = clients["nobody"].get(url)
    assert response.status_code == 403
    assert b"you have no role" in response.content


@pytest.mark.parametrize(
    ("role", "url", "data"),
    [
        ("viewer", "/policies/", {"template": "blank", "name": "x"}),
        ("viewer", "/policies/seed-003-name-length/draft", {"document": "", "if_match": "*"}),
        ("viewer", "/policies/seed-003-name-length/tests/add", {}),
        ("viewer", "/policies/seed-003-name-length/tests/delete", {"case": "x"}),
        ("editor", "/policies/seed-003-name-length/publish", {"message": "m"}),
        ("editor", "/policies/seed-003-name-length/rollback", {"number": "1"}),
        ("editor", "/policies/seed-003-name-length/deactivate", {}),
        ("publisher", "/policies/seed-003-name-length/delete", {}),
    ],
)
def test_every_write_checks_the_role_on_the_server(clients, seed003, role, url, data):
    before = Policy.objects.get(pk=seed003.pk)
    response = clients[role].post(url, data, **HTMX)
    assert response.status_code == 403
    assert f"you have the {role} role".encode() in response.content
    after = Policy.objects.get(pk=seed003.pk)
    assert (after.draft_revision, after.versions.count()) == (before.draft_revision, 0)


def test_a_get_on_a_post_only_endpoint_is_not_allowed(clients, seed003):
    assert clients["editor"].get("/policies/seed-003-name-length/draft").status_code == 405


# --- list and create ----------------------------------------------------------------------------


def _published_with_a_changed_draft(users, seed003, draft: str | None = None) -> None:
    """seed-003 published as v1, then its draft changed to `draft` (by default the name limit
    5 -> 6)."""
    services.policy_publish(
        actor=users["publisher"], policy=seed003, message="v1", revision=seed003.draft_revision
    )
    seed003.refresh_from_db()
    if draft is None:
        draft = seed003.draft.replace("size(pod.name) < 5", "size(pod.name) < 6")
    services.policy_update_draft(
        actor=users["editor"], policy=seed003, document=draft, if_match=seed003.etag
    )


def test_the_list_shows_the_active_version_its_publisher_and_a_changed_draft(
    clients, users, seed003
):
    _published_with_a_changed_draft(users, seed003)
    html = clients["viewer"].get("/policies/").content.decode()
    assert "v1 active" in html
    assert "published by publisher" in html
    assert "changed since v1" in html
    assert "<code>schedweb</code>" in html


def test_the_list_searches_names_and_descriptions(clients, users, seed003):
    services.policy_create(actor=users["editor"], document=example("bin-packing"))
    html = clients["viewer"].get("/policies/?q=busiest").content.decode()
    assert "bin-packing" in html
    assert "seed-003-name-length" not in html


def test_viewers_get_no_new_policy_button(clients, seed003):
    assert b"data-dialog-open" not in clients["viewer"].get("/policies/").content
    assert b"data-dialog-open" in clients["editor"].get("/policies/").content


def test_an_editor_creates_a_policy_from_an_example_under_a_name_of_their_own(clients):
    response = clients["editor"].post("/policies/", {"template": "bin-packing", "name": "pack-2"})
    assert response.status_code == 302
    assert response["Location"] == "/policies/pack-2/"
    created = Policy.objects.get(name="pack-2")
    assert yaml.safe_load(created.draft)["name"] == "pack-2"
    # everything but the name is the example's
    assert created.draft == document_with_name(text=example("bin-packing"), name="pack-2")


def test_creating_the_same_example_twice_says_the_name_is_taken(clients):
    clients["editor"].post("/policies/", {"template": "bin-packing", "name": ""})
    response = clients["editor"].post("/policies/", {"template": "bin-packing", "name": ""})
    assert response.status_code == 409
    assert b"A policy named &#x27;bin-packing&#x27; already exists" in response.content
    assert b"data-open-on-load" in response.content  # the dialog opens again with the error


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"template": "blank", "name": ""}, b"a blank policy needs a name"),
        ({"template": "blank", "name": "Bad_Name"}, b"is not a valid policy name"),
        ({"template": "no-such-example", "name": "x"}, b"Select a valid choice"),
    ],
)
def test_a_bad_new_policy_form_is_answered_with_the_field_error(clients, data, message):
    response = clients["editor"].post("/policies/", data)
    assert response.status_code == 422
    assert message in response.content
    assert not Policy.objects.exists()


def test_the_blank_template_is_a_valid_policy(clients):
    response = clients["editor"].post("/policies/", {"template": "blank", "name": "mine"})
    assert response.status_code == 302
    assert validate_policy(Policy.objects.get(name="mine").draft) == []


# --- the playground -----------------------------------------------------------------------------


def test_the_playground_renders_a_first_preview_of_every_demo_node(clients, seed003):
    response = clients["viewer"].get("/policies/seed-003-name-length/?pod=default/abc")
    html = response.content.decode()
    assert response.status_code == 200
    table = html[html.index('id="nodes"') : html.index("</table>", html.index('id="nodes"'))]
    body = table[table.index("<tbody>") :]
    assert body.count("<tr") == len(demo_names())
    # the answer: kube-scheduler's pick, not the policy's favourite (the shortest name)
    (pick,) = kube_pick(seed003.draft)
    assert pick != shortest_node()
    assert f'id="summary-pick" title="{pick}">{pick}' in html


def test_the_playground_offers_pending_pods_examples_and_paste(clients, seed003):
    html = clients["viewer"].get("/policies/seed-003-name-length/").content.decode()
    for ref in pending_pods():
        assert f'<option value="{ref}"' in html
    assert '<option value="example:web"' in html
    assert '<option value="pasted"' in html


def test_viewers_see_no_edit_controls_and_editors_do(clients, seed003):
    viewer = clients["viewer"].get("/policies/seed-003-name-length/").content.decode()
    editor = clients["editor"].get("/policies/seed-003-name-length/").content.decode()
    publisher = clients["publisher"].get("/policies/seed-003-name-length/").content.decode()
    for control in ('id="save-button"', 'id="add-test-button"'):
        assert control not in viewer
        assert control in editor
    assert 'id="publish-link"' not in editor
    assert 'id="publish-link"' in publisher


def test_the_playground_opens_a_version_and_a_pod_from_a_link(clients, users, seed003):
    services.policy_publish(
        actor=users["publisher"], policy=seed003, message="first", revision=seed003.draft_revision
    )
    response = clients["viewer"].get(
        "/policies/seed-003-name-length/?version=1&pod=ml/train-llama-0"
    )
    html = response.content.decode()
    assert "Editing a copy of v1" in html
    assert '<option value="ml/train-llama-0" selected>' in html


def test_an_unknown_version_is_a_404(clients, seed003):
    assert clients["viewer"].get("/policies/seed-003-name-length/?version=9").status_code == 404


def test_a_pod_link_to_a_pod_that_is_gone_says_so(clients, seed003):
    html = (
        clients["viewer"].get("/policies/seed-003-name-length/?pod=default/gone").content.decode()
    )
    assert "pod default/gone is not in the demo cluster" in html


# --- live preview -------------------------------------------------------------------------------


def preview(client: Client, document: str, **fields: str):
    data = {"document": document, "pod": "default/abc", "revision": "7", "seq": "3", **fields}
    return client.post("/policies/seed-003-name-length/preview", data, **HTMX)


def test_a_type_error_in_the_preview_reads_plainly_with_cels_words_one_click_away(clients, seed003):
    broken = seed003.draft.replace("size(pod.name) < 5", "pod.labels['tier'] < 5")
    html = preview(clients["viewer"], broken).content.decode()
    from html import unescape

    problems = html.split('id="preview-problems"', 1)[1]
    plain, cel = problems.split('<details class="pg-cel-message">', 1)
    assert "'<' cannot compare a string with an int; convert one side" in unescape(plain)
    cel = unescape(cel.split("</details>", 1)[0])
    assert "<summary>CEL's own message</summary>" in cel
    assert "no matching overload for '<' applied to (string, int)" in cel


def test_the_preview_answers_the_table_out_of_band_and_echoes_the_sequence(clients, seed003):
    response = preview(clients["viewer"], seed003.draft)
    html = response.content.decode()
    assert response.status_code == 200
    assert response["X-Preview-State"] == "ok"
    assert response["X-Preview-Seq"] == "3"
    assert (
        '<div id="preview-result" class="pg-result" data-state="ok" data-revision="7" hx-swap-oob="true">'
        in html
    )
    assert markers_of(html) == []


def test_a_preview_past_the_time_limit_is_explained_not_a_500(clients, seed003, settings):
    settings.SCHEDWEB_PREVIEW_SECONDS = 1e-9
    # a clock that moves a second each time it is read: the first look past the start is late
    with deadline(None, clock=StepClock()):
        response = preview(clients["viewer"], seed003.draft)
    assert response.status_code == 422  # the status htmx swaps, with the message
    assert response["X-Preview-State"] == "unavailable"
    text = response.content.decode()
    assert "simplify its expressions" in text
    assert "SCHEDWEB_" not in text  # what to do, not how the server is configured


def test_the_preview_reflects_the_posted_document_not_the_saved_draft(clients, seed003):
    # 7 characters: the pod name abcdefg fails `size(pod.name) < 5`; allowing 8 lets it pass
    pod = "default/abcdefg"
    strict = preview(clients["viewer"], seed003.draft, pod=pod).content.decode()
    loose = preview(
        clients["viewer"],
        seed003.draft.replace("size(pod.name) < 5", "size(pod.name) < 8"),
        pod=pod,
    ).content.decode()
    assert '<span class="pg-pass-count">0</span>' in strict
    assert 'id="summary-pick" title=""><span class="pg-of">none: unschedulable' in strict
    (pick,) = kube_pick(seed003.draft.replace("< 5", "< 8"), pod)
    assert f'id="summary-pick" title="{pick}">{pick}' in loose


def test_an_invalid_document_answers_422_with_a_marker_at_the_typo_and_no_table(clients, seed003):
    document = seed003.draft.replace(
        "expression: 20 - size(node.name)", "expression: 20 - size(node.nmae)"
    )
    response = preview(clients["viewer"], document)
    html = response.content.decode()
    assert response.status_code == 422
    assert response["X-Preview-State"] == "invalid"
    assert 'id="preview-result"' not in html  # the page keeps its last good table
    line, column = position(document, "nmae")
    assert [(m["line"], m["column"], m["source"]) for m in markers_of(html)] == [
        (line, column, "scores[0].expression")
    ]
    assert "scores[0].expression" in html and "did you mean" in html


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        ("default/gone", "pod default/gone is not in the demo cluster"),
        ("example:nope", "there is no example pod"),
        ("not a pod", "expected namespace/name"),
        ("pasted", "paste a Pod manifest"),
    ],
)
def test_a_pod_that_cannot_be_used_is_explained(clients, seed003, pod, message):
    response = preview(clients["viewer"], seed003.draft, pod=pod)
    assert response.status_code == 422
    assert response["X-Preview-State"] == "unavailable"
    assert message in response.content.decode().replace("&#x27;", "'")


def test_a_pasted_pod_is_previewed(clients, seed003):
    response = preview(
        clients["viewer"], seed003.draft, pod="pasted", pod_yaml=example_pod("abcdefg")
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "default/abcdefg" in html
    assert "short-pod-name</span> rejects" in html


def test_a_pasted_pod_preview_notes_what_admission_added(clients, seed003):
    pod = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: big}\nspec:\n"
        "  containers: [{name: c, image: x, resources: {limits: {cpu: '500'}}}]\n"
    )
    html = preview(clients["viewer"], seed003.draft, pod="pasted", pod_yaml=pod).content.decode()
    assert 'data-testid="admitted"' in html
    assert "spec.containers[0].resources.requests.cpu: 500 (its limit)" in html
    assert "node.kubernetes.io/unreachable:NoExecute for 300s" in html
    # no node has 500 cpus: the answer says why with kube-scheduler's FailedScheduling
    # message, whole (not the reason counts that approximate it)
    answer = re.search(r'id="summary-answer">(.*?)</span></span>', html).group(1)
    assert 'data-testid="failed-scheduling"' in answer
    assert "0/36 nodes are available: " in answer and "Insufficient cpu" in answer
    assert "preemption: 0/36 nodes are available" in answer
    assert html.count('data-testid="failed-scheduling"') == 1  # said once


def test_the_preview_remembers_the_pod_for_the_next_visit(clients, seed003):
    preview(clients["viewer"], seed003.draft, pod="example:gpu-training")
    html = clients["viewer"].get("/policies/seed-003-name-length/").content.decode()
    assert '<option value="example:gpu-training" selected>' in html


def test_compare_mode_shows_the_pick_feasible_set_and_reasons_side_by_side(clients, users, seed003):
    services.policy_publish(
        actor=users["publisher"],
        policy=seed003,
        message="short wins",
        revision=seed003.draft_revision,
    )
    # the draft flips the score: long names score highest, and the pod moves
    draft = seed003.draft.replace("expression: 20 - size(node.name)", "expression: size(node.name)")
    html = preview(clients["viewer"], draft, compare="1").content.decode()
    (before,) = kube_pick(seed003.draft)
    (after,) = kube_pick(draft)
    assert before != after
    assert 'data-moves="true"' in html and "The pod moves" in html
    sides = html[
        html.index('id="compare-sides"') : html.index("</table>", html.index('id="compare-sides"'))
    ]
    assert (
        f'<th scope="row">kube-scheduler picks</th><td class="mono">{before}</td>'
        f'<td class="mono">{after}</td>'
    ) in sides
    assert '<th scope="row">feasible nodes</th><td>27</td><td>27</td>' in sides
    # the nodes whose final total changes, with their final rank before and after
    changes = html[html.index('id="changes"') :]
    assert f'<td class="mono">{after}</td>' in changes


def test_compare_for_a_one_line_change_that_moves_no_pod_says_so_in_one_line(
    clients, users, seed003
):
    services.policy_publish(
        actor=users["publisher"], policy=seed003, message="v1", revision=seed003.draft_revision
    )
    # one line: cp-1 scores 10 more; 26 of the policy's totals over every node move (what
    # the comparison counted before issue 23), no node's final total, verdict or reason does
    draft = cp1_scores_more(seed003.draft)
    html = preview(clients["viewer"], draft, compare="1").content.decode()
    (pick,) = kube_pick(seed003.draft)
    banner = re.search(r'<p id="compare-banner"[^>]*data-moves="false">(.*?)</p>', html, re.S)
    assert banner is not None
    assert "\n" not in banner.group(1)
    assert banner.group(1).startswith(
        f"No change in the cluster: kube-scheduler picks {pick} either way, from the same 27 "
        "feasible nodes."
    )
    assert 'id="compare-sides"' not in html and 'id="changes"' not in html


def test_compare_with_the_same_document_says_nothing_moves(clients, users, seed003):
    services.policy_publish(
        actor=users["publisher"], policy=seed003, message="v1", revision=seed003.draft_revision
    )
    html = preview(clients["viewer"], seed003.draft, compare="1").content.decode()
    assert 'data-moves="false"' in html and "No change in the cluster" in html


def test_the_preview_needs_few_queries(clients, seed003, django_assert_max_num_queries):
    preview(clients["viewer"], seed003.draft)  # warm caches (compiled policy, demo cluster)
    # session, user, role groups and the stored scheduler configuration (one primary-key read):
    # nothing else touches the database without compare mode
    with django_assert_max_num_queries(4):
        preview(clients["viewer"], seed003.draft.replace("< 5", "< 6"))


# --- markers ----------------------------------------------------------------------------------


BLOCKS = """\
name: blocks
schedulerNames: [schedweb]
variables:
  - name: plain
    expression: node.allocatable.cpu - node.requested.cpu
  - name: quoted
    expression: 'node.allocatable.cpu + 1'
  - name: folded
    expression: >-
      node.allocatable.cpu > 0 ?
      node.requested.cpu * 100 / node.allocatable.cpu : 0
  - name: literal
    expression: |
      node.allocatable.cpu +
        node.requested.cpu
  - name: continued
    expression: node.allocatable.cpu +
      node.requested.cpu
scores:
  - name: anything
    expression: variables.plain
"""


@pytest.mark.parametrize(
    "occurrence",
    # each occurrence of node.requested / node.allocatable, in every scalar style; a typo there
    # must be marked exactly where it is typed
    range(BLOCKS.count("node.requested") + BLOCKS.count("node.allocatable")),
)
def test_a_typo_is_marked_where_it_is_typed_in_every_yaml_scalar_style(occurrence):
    spots = sorted(
        [m.start() for m in re.finditer(r"node\.requested", BLOCKS)]
        + [m.start() for m in re.finditer(r"node\.allocatable", BLOCKS)]
    )
    at = spots[occurrence] + len("node.")
    broken = BLOCKS[:at] + "x" + BLOCKS[at:]  # node.xrequested: an undefined field
    errors = validate_policy(broken)
    assert len(errors) == 1
    markers, unplaced = error_markers(text=broken, errors=errors)
    line = broken.count("\n", 0, at) + 1
    column = at - (broken.rfind("\n", 0, at) + 1) + 1
    assert (markers[0]["line"], markers[0]["column"]) == (line, column)
    assert unplaced == []


def test_an_error_without_a_place_is_listed_not_marked():
    errors = [FieldError("", "the document is empty", kind="yaml")]
    markers, unplaced = error_markers(text="", errors=errors)
    assert markers == [] and unplaced == errors


def test_evaluation_errors_become_warnings_at_their_rule(clients, seed003):
    # 100 / (node.podCount - k) divides by zero on the nodes holding k pods (failurePolicy
    # Ignore: they pass with that score 0); k is the most common pod count of the demo nodes
    counts = Counter(n["podCount"] for n in cluster_load("demo").nodes())
    k, failing = counts.most_common(1)[0]
    document = seed003.draft.replace(
        "expression: 20 - size(node.name)", f"expression: 100 / (node.podCount - {k})"
    )
    markers = markers_of(preview(clients["viewer"], document).content.decode())
    assert [m["severity"] for m in markers] == ["warning"]
    assert markers[0]["line"] == position(document, "100 / (node.podCount")[0]
    assert markers[0]["source"] == "scores[0].expression"
    assert f"evaluation error on {failing} node" in markers[0]["message"]
    assert "division by zero" in markers[0]["message"]


# --- saving ---------------------------------------------------------------------------------


def save(client: Client, document: str, if_match: str):
    return client.post(
        "/policies/seed-003-name-length/draft",
        {"document": document, "if_match": if_match},
        **HTMX,
    )


def test_saving_with_the_current_etag_stores_the_draft_and_answers_the_new_one(clients, seed003):
    document = seed003.draft.replace("< 5", "< 6")
    response = save(clients["editor"], document, seed003.etag)
    assert response.status_code == 200
    saved = Policy.objects.get(pk=seed003.pk)
    assert (saved.draft, saved.draft_revision) == (document, seed003.draft_revision + 1)
    html = response.content.decode().replace("&quot;", '"')
    assert f'id="if-match" name="if_match" value="{saved.etag}" hx-swap-oob="true"' in html
    assert "Draft saved" in response["HX-Trigger"]


def test_a_stale_save_changes_nothing_and_answers_the_current_draft(clients, users, seed003):
    stale_etag = seed003.etag
    theirs = seed003.draft.replace("< 5", "< 7")
    services.policy_update_draft(
        actor=users["admin"], policy=seed003, document=theirs, if_match=stale_etag
    )
    response = save(clients["editor"], seed003.draft.replace("< 5", "< 9"), stale_etag)
    assert response.status_code == 412
    assert Policy.objects.get(pk=seed003.pk).draft == theirs
    html = response.content.decode()
    assert "The draft changed since you read it" in html
    assert "admin saved" in html
    assert (
        json.loads(re.search(r'id="stale-draft"[^>]*>(.*?)</script>', html, re.S).group(1))
        == theirs
    )


def test_an_invalid_draft_is_not_saved_and_its_problems_are_marked(clients, seed003):
    document = seed003.draft.replace(
        "expression: 20 - size(node.name)", "expression: 20 - size(node.nmae)"
    )
    response = save(clients["editor"], document, seed003.etag)
    assert response.status_code == 422
    assert Policy.objects.get(pk=seed003.pk).draft_revision == seed003.draft_revision
    assert markers_of(response.content.decode())[0]["line"] == position(document, "nmae")[0]


def test_renaming_a_policy_by_saving_is_refused_in_words(clients, seed003):
    document = seed003.draft.replace("name: seed-003-name-length", "name: other")
    response = save(clients["editor"], document, seed003.etag)
    assert response.status_code == 422
    assert "a policy cannot be renamed" in response.content.decode()


# --- test cases -------------------------------------------------------------------------------


def add_test(
    client: Client,
    document: str,
    pod: str = "default/abc",
    name: str = "",
    policy: str = "seed-003-name-length",
):
    return client.post(
        f"/policies/{policy}/tests/add",
        {"document": document, "pod": pod, "test_name": name},
        **HTMX,
    )


def test_add_as_test_case_pins_kube_schedulers_pick_and_the_policys_rejections_only(
    clients, seed003
):
    response = add_test(clients["editor"], seed003.draft)
    assert response.status_code == 200
    case = PolicyTestCase.objects.get(policy=seed003)
    (pick,) = kube_pick(seed003.draft)
    assert case.name == f"abc-on-{pick}"
    assert case.cluster == "demo"
    # the pod lands on the pick; the policy rejects no node it is sent: nothing else is pinned
    assert case.expect == {"landsIn": [pick]}
    assert pod_view_from_text(case.pod)["name"] == "abc"
    # and it holds: the draft passes its new test
    compiled = compile_policy(seed003.draft)
    assert [
        r["passed"] for r in run_test_cases(compiled=compiled, stored=seed003.test_cases.all())
    ] == [True]
    assert "Added test case" in response["HX-Trigger"]
    html = response.content.decode()
    assert 'id="tests-list" class="pg-tests" hx-swap-oob="true"' in html
    assert f'<span id="added-test-summary">lands on {pick}</span>' in html


def test_a_rejected_pod_becomes_an_unschedulable_test_with_its_reasons(clients, seed003):
    add_test(clients["editor"], seed003.draft, pod="default/abcdefg")
    case = PolicyTestCase.objects.get(policy=seed003)
    assert case.name == "abcdefg-unschedulable"
    message = "short-pod-name: pod name abcdefg is 7 characters, the limit is 4"
    assert case.expect["unschedulable"][0] == message  # the policy's rejection, the most nodes
    assert "node(s) had untolerated taint(s)" in case.expect["unschedulable"]
    # the nodes the policy rejects (those kube-scheduler sends it), by rule; never verdicts
    assert set(case.expect["rejectedBy"].values()) == {"short-pod-name"}
    assert "cp-1" not in case.expect["rejectedBy"]  # a taint rejects it first
    assert "verdicts" not in case.expect and "winner" not in case.expect


def test_the_author_chooses_what_the_test_case_pins(clients, seed003):
    def add(*pins: str, name: str):
        return clients["editor"].post(
            "/policies/seed-003-name-length/tests/add",
            {
                "document": seed003.draft,
                "pod": "default/abc",
                "test_name": name,
                "pins_shown": "1",
                "pin": list(pins),
            },
            **HTMX,
        )

    assert add("pluginRejects", "bogus", name="plugins").status_code == 200
    case = PolicyTestCase.objects.get(name="plugins")
    assert case.expect == {
        "rejectedBy": {
            "a-gpu-1": "TaintToleration",
            "a-spot-1": "TaintToleration",
            "b-gpu-1": "TaintToleration",
            "b-gpu-2": "TaintToleration",
            "b-spot-1": "TaintToleration",
            "c-gpu-1": "TaintToleration",
            "c-small-3": "TaintToleration",
            "cp-1": "TaintToleration",
            "worker-medium-b-3": "NodeUnschedulable",
        }
    }
    response = add(name="nothing")  # every box unticked
    assert response.status_code == 422
    assert "Tick at least one thing" in response.content.decode()
    assert not PolicyTestCase.objects.filter(name="nothing").exists()


def test_the_preview_offers_the_pins_with_the_defaults_ticked_to_editors_only(clients, seed003):
    html = preview(clients["editor"], seed003.draft).content.decode()
    pins = html[html.index('id="test-pins"') : html.index("</fieldset>")]
    (pick,) = kube_pick(seed003.draft)
    assert f'value="pick" checked> lands in {pick}' in pins
    assert 'value="pluginRejects"> the 9 node(s) kube-scheduler' in pins
    assert 'id="test-pins"' not in preview(clients["viewer"], seed003.draft).content.decode()


def test_test_names_are_generated_unique_or_taken_from_the_form(clients, seed003):
    add_test(clients["editor"], seed003.draft)
    add_test(clients["editor"], seed003.draft)
    add_test(clients["editor"], seed003.draft, name="my own name")
    names = sorted(PolicyTestCase.objects.values_list("name", flat=True))
    (pick,) = kube_pick(seed003.draft)
    base = f"abc-on-{pick}"
    assert names == sorted([base, f"{base}-2", "my own name"])


def test_a_test_case_name_in_use_is_refused_in_words(clients, seed003):
    add_test(clients["editor"], seed003.draft, name="same")
    response = add_test(clients["editor"], seed003.draft, name="same")
    assert response.status_code == 422
    assert "already has a test case named" in response.content.decode().replace("&#x27;", "'")


def test_the_tests_page_shows_failures_against_the_saved_draft(clients, users, seed003):
    add_test(clients["editor"], seed003.draft)
    # the saved draft now prefers long names: the stored winner no longer wins
    services.policy_update_draft(
        actor=users["editor"],
        policy=Policy.objects.get(pk=seed003.pk),
        document=seed003.draft.replace("20 - size(node.name)", "size(node.name)"),
        if_match=Policy.objects.get(pk=seed003.pk).etag,
    )
    html = clients["viewer"].get("/policies/seed-003-name-length/tests/").content.decode()
    assert 'badge--reject badge--dot">fail' in html
    (pick,) = kube_pick(seed003.draft)
    assert f"expected the pod to land in {pick}, but kube-scheduler picks" in html


def test_an_editor_deletes_a_test_case(clients, seed003):
    add_test(clients["editor"], seed003.draft, name="gone soon")
    response = clients["editor"].post(
        "/policies/seed-003-name-length/tests/delete", {"case": "gone soon"}, **HTMX
    )
    assert response.status_code == 200
    assert not PolicyTestCase.objects.exists()
    assert "No test cases yet" in response.content.decode()


def test_running_tests_against_the_editor_text(clients, seed003):
    add_test(clients["editor"], seed003.draft)
    flipped = seed003.draft.replace("20 - size(node.name)", "size(node.name)")
    html = (
        clients["viewer"]
        .post("/policies/seed-003-name-length/tests/run", {"document": flipped}, **HTMX)
        .content.decode()
    )
    assert "against the editor&#x27;s text" in html
    assert "fail" in html


# --- publish, rollback, deactivate ------------------------------------------------------------


def test_the_publish_check_runs_the_tests_and_offers_the_confirmation(clients, seed003):
    add_test(clients["editor"], seed003.draft)
    response = clients["publisher"].post(
        "/policies/seed-003-name-length/publish", {"message": "first", "step": "check"}, **HTMX
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert 'badge--pass badge--dot">pass</span> <span class="mono">abc-on-' in html
    assert 'id="publish-confirm-button"' in html
    assert f'name="revision" value="{seed003.draft_revision}"' in html
    assert not PolicyVersion.objects.exists()  # nothing is published by the check


def test_confirming_publishes_v1_and_says_so(clients, seed003):
    response = clients["publisher"].post(
        "/policies/seed-003-name-length/publish",
        {"message": "first", "step": "confirm", "revision": str(seed003.draft_revision)},
        follow=True,
    )
    assert response.status_code == 200
    version = PolicyVersion.objects.get(policy=seed003)
    assert (version.number, version.message, version.author.username) == (1, "first", "publisher")
    assert b"Published seed-003-name-length v1" in response.content


def test_the_publish_review_lists_queue_and_gang_changes(clients, users):
    """seed 002's queue: and gang: change every pod's priority and grouping: the review lists
    them beside the rules, not "no rule changed"."""
    seed002 = services.policy_create(actor=users["editor"], document=example("seed-002"))
    services.policy_publish(
        actor=users["publisher"], policy=seed002, message="v1", revision=seed002.draft_revision
    )
    seed002.refresh_from_db()
    edited = seed002.draft.replace("max: 29", "max: 28").replace("gang: {}", "gang: {minCount: 3}")
    assert edited.count("max: 28") == 1 and "minCount: 3" in edited
    services.policy_update_draft(
        actor=users["editor"], policy=seed002, document=edited, if_match=seed002.etag
    )
    html = (
        clients["publisher"]
        .post("/policies/seed-002/publish", {"message": "m", "step": "check"}, **HTMX)
        .content.decode()
    )
    assert '<span class="pg-rule pg-rule--changed" title="changed">~ queue</span>' in html
    assert '<span class="pg-rule pg-rule--changed" title="changed">~ gang</span>' in html
    assert "no rule changed" not in html


def test_seed_002s_test_case_counts_include_its_in_document_cases(clients, users):
    seed002 = services.policy_create(actor=users["editor"], document=example("seed-002"))
    in_document = len(yaml.safe_load(seed002.draft)["tests"])
    assert in_document == 3 and not seed002.test_cases.exists()
    playground = clients["viewer"].get("/policies/seed-002/").content.decode()
    assert f'<span class="count" id="tests-count">{in_document}</span>' in playground
    assert f"{in_document} test cases (0 stored, the rest in the document" in playground
    page = clients["viewer"].get("/policies/seed-002/tests/").content.decode()
    assert f'Test cases <span class="count" id="tests-count">{in_document}</span>' in page
    assert page.count('title="Declared in the document\'s tests:">in document</span>') == 3
    # one stored case more: 4
    assert add_test(clients["editor"], seed002.draft, policy="seed-002").status_code == 200
    page = clients["viewer"].get("/policies/seed-002/").content.decode()
    assert f'id="tests-count">{in_document + 1}</span>' in page


def test_a_draft_that_does_not_compile_counts_its_stored_test_cases_only():
    from policies.evaluation import policy_test_case_count

    assert policy_test_case_count(stored_names=["a", "b"], document="name: [") == 2
    assert policy_test_case_count(stored_names=[], document=example("seed-002")) == 3
    # a stored case named like one in the document is one row, counted once
    named = yaml.safe_load(example("seed-002"))["tests"][0]["name"]
    assert policy_test_case_count(stored_names=[named], document=example("seed-002")) == 3


def _holder_of_the_name(users) -> Policy:
    """bin-packing, published, serves the schedulerName `schedweb` that seed-003 targets too."""
    holder = services.policy_create(actor=users["editor"], document=example("bin-packing"))
    services.policy_publish(
        actor=users["publisher"], policy=holder, message="v1", revision=holder.draft_revision
    )
    return holder


def test_the_review_shows_a_scheduler_name_conflict_with_a_link_and_no_publish_button(
    clients, users, seed003
):
    _holder_of_the_name(users)
    check = clients["publisher"].post(
        "/policies/seed-003-name-length/publish", {"message": "m", "step": "check"}, **HTMX
    )
    html = check.content.decode()
    assert 'id="publish-conflict"' in html
    assert "schedulerName schedweb is already served by policy bin-packing (v1)" in html
    assert 'id="conflict-link" href="/policies/bin-packing/versions/"' in html
    assert "publish-confirm-button" not in html


def test_a_conflict_found_at_confirm_keeps_the_message_and_links_the_holder(
    clients, users, seed003
):
    # reviewed while the name was free; another policy took it before the confirm
    _holder_of_the_name(users)
    confirm = clients["publisher"].post(
        "/policies/seed-003-name-length/publish",
        {"message": "my careful words", "step": "confirm", "revision": str(seed003.draft_revision)},
    )
    html = confirm.content.decode()
    assert confirm.status_code == 409
    assert 'id="conflict-link" href="/policies/bin-packing/versions/"' in html
    assert re.search(r'<textarea name="message"[^>]*>\s*my careful words</textarea>', html)  # kept
    assert not PolicyVersion.objects.filter(policy=seed003).exists()
    # a reload of that page's URL lands on the versions page, not on an empty 405
    reload = clients["publisher"].get("/policies/seed-003-name-length/publish")
    assert (reload.status_code, reload["Location"]) == (
        302,
        "/policies/seed-003-name-length/versions/",
    )


def test_a_publish_without_a_message_is_refused(clients, seed003):
    response = clients["publisher"].post(
        "/policies/seed-003-name-length/publish", {"message": "  ", "step": "check"}, **HTMX
    )
    assert response.status_code == 422
    assert b"a publish message is required" in response.content


def test_a_failing_test_blocks_publishing_with_422_in_words(clients, users, seed003):
    add_test(clients["editor"], seed003.draft)
    seed003.refresh_from_db()
    services.policy_update_draft(
        actor=users["editor"],
        policy=seed003,
        document=seed003.draft.replace("20 - size(node.name)", "size(node.name)"),
        if_match=seed003.etag,
    )
    seed003.refresh_from_db()
    check = clients["publisher"].post(
        "/policies/seed-003-name-length/publish", {"message": "m", "step": "check"}, **HTMX
    )
    assert b"Publishing is blocked" in check.content
    assert b"publish-confirm-button" not in check.content
    forced = clients["publisher"].post(
        "/policies/seed-003-name-length/publish",
        {"message": "m", "step": "confirm", "revision": str(seed003.draft_revision)},
    )
    assert forced.status_code == 422
    assert b"1 of 1 test case failed; nothing was published" in forced.content
    assert not PolicyVersion.objects.exists()


def test_a_draft_changed_after_the_review_is_not_published(clients, users, seed003):
    reviewed = seed003.draft_revision
    services.policy_update_draft(
        actor=users["editor"],
        policy=seed003,
        document=seed003.draft.replace("< 5", "< 6"),
        if_match=seed003.etag,
    )
    response = clients["publisher"].post(
        "/policies/seed-003-name-length/publish",
        {"message": "m", "step": "confirm", "revision": str(reviewed)},
    )
    assert response.status_code == 409
    assert b"The draft changed since you reviewed it" in response.content
    assert not PolicyVersion.objects.exists()


def test_a_scheduler_name_served_by_another_policy_is_a_409_in_words(clients, users, seed003):
    other = services.policy_create(actor=users["editor"], document=example("bin-packing"))
    services.policy_publish(
        actor=users["publisher"],
        policy=other,
        message="serves schedweb",
        revision=other.draft_revision,
    )
    response = clients["publisher"].post(
        "/policies/seed-003-name-length/publish",
        {"message": "m", "step": "confirm", "revision": str(seed003.draft_revision)},
    )
    assert response.status_code == 409
    assert b"is already served by policy bin-packing" in response.content.replace(b"&#x27;", b"'")


def test_rollback_activates_the_older_version(clients, users, seed003):
    services.policy_publish(
        actor=users["publisher"], policy=seed003, message="v1", revision=seed003.draft_revision
    )
    seed003.refresh_from_db()
    services.policy_update_draft(
        actor=users["editor"],
        policy=seed003,
        document=seed003.draft.replace("< 5", "< 6"),
        if_match=seed003.etag,
    )
    services.policy_publish(
        actor=users["publisher"],
        policy=Policy.objects.get(pk=seed003.pk),
        message="v2",
        revision=Policy.objects.get(pk=seed003.pk).draft_revision,
    )
    response = clients["publisher"].post(
        "/policies/seed-003-name-length/rollback", {"number": "1"}, follow=True
    )
    assert b"Rolled back seed-003-name-length to v1" in response.content
    from policies.selectors import policy_get_active

    assert policy_get_active(policy=seed003).number == 1


def _two_versions(users, seed003) -> None:
    _published_with_a_changed_draft(users, seed003)
    seed003.refresh_from_db()
    services.policy_publish(
        actor=users["publisher"], policy=seed003, message="v2", revision=seed003.draft_revision
    )


def test_a_rollback_keeps_its_optional_reason_in_the_audit_log(clients, users, seed003):
    from policies.models import AuditEvent

    _two_versions(users, seed003)
    page = clients["publisher"].get("/policies/seed-003-name-length/versions/").content.decode()
    assert 'id="rollback-message" name="message"' in page
    assert 'form="rollback-form" name="number" value="1"' in page
    response = clients["publisher"].post(
        "/policies/seed-003-name-length/rollback",
        {"number": "1", "message": "  v2 starves long pod names  "},
        follow=True,
    )
    assert b"Rolled back seed-003-name-length to v1" in response.content
    event = AuditEvent.objects.get(action="policy.rollback")
    assert event.detail["message"] == "v2 starves long pod names" and event.version == 1
    feed = clients["viewer"].get("/").content.decode().split('id="recent-audit"', 1)[1]
    assert "rolled back" in feed and "to v1: v2 starves long pod names" in feed


def test_a_rollback_without_a_reason_records_none_and_a_too_long_one_is_refused(
    clients, users, seed003
):
    from policies.models import AuditEvent
    from policies.selectors import policy_get_active

    _two_versions(users, seed003)
    response = clients["publisher"].post(
        "/policies/seed-003-name-length/rollback", {"number": "1", "message": "x" * 2001}
    )
    assert response.status_code == 400
    assert b"Keep the reason under 2000 characters." in response.content
    assert policy_get_active(policy=seed003).number == 2  # nothing changed
    clients["publisher"].post("/policies/seed-003-name-length/rollback", {"number": "1"})
    assert "message" not in AuditEvent.objects.get(action="policy.rollback").detail


def test_the_closed_delete_card_says_what_it_does(clients, users, seed003):
    services.policy_publish(
        actor=users["publisher"], policy=seed003, message="v1", revision=seed003.draft_revision
    )
    html = clients["admin"].get("/policies/seed-003-name-length/versions/").content.decode()
    summary = html.split('id="delete-summary"', 1)[1].split("</summary>", 1)[0]
    assert "Delete this policy" in summary
    assert "Removes seed-003-name-length with its 1 version and test cases" in summary
    assert "Delete…" in summary  # the button that opens it, visible while closed


def test_rolling_back_to_the_active_version_is_a_409_in_words(clients, users, seed003):
    services.policy_publish(
        actor=users["publisher"], policy=seed003, message="v1", revision=seed003.draft_revision
    )
    response = clients["publisher"].post("/policies/seed-003-name-length/rollback", {"number": "1"})
    assert response.status_code == 409
    assert b"ersion 1 is already the active version" in response.content


def test_deactivating_takes_the_policy_out_of_service_and_twice_is_a_409(clients, users, seed003):
    services.policy_publish(
        actor=users["publisher"], policy=seed003, message="v1", revision=seed003.draft_revision
    )
    first = clients["publisher"].post("/policies/seed-003-name-length/deactivate", follow=True)
    assert b"Deactivated seed-003-name-length" in first.content
    again = clients["publisher"].post("/policies/seed-003-name-length/deactivate")
    assert again.status_code == 409
    assert b"is not active" in again.content


def test_an_admin_deletes_an_inactive_policy_after_typing_its_name(clients, seed003):
    wrong = clients["admin"].post("/policies/seed-003-name-length/delete", {"confirm_name": "x"})
    assert wrong.status_code == 400
    right = clients["admin"].post(
        "/policies/seed-003-name-length/delete", {"confirm_name": "seed-003-name-length"}
    )
    assert right.status_code == 302
    assert not Policy.objects.exists()


def test_the_versions_page_lists_versions_with_rollback_only_for_publishers(
    clients, users, seed003
):
    services.policy_publish(
        actor=users["publisher"],
        policy=seed003,
        message="the first one",
        revision=seed003.draft_revision,
    )
    viewer = clients["viewer"].get("/policies/seed-003-name-length/versions/").content.decode()
    publisher = (
        clients["publisher"].get("/policies/seed-003-name-length/versions/").content.decode()
    )
    assert "the first one" in viewer and "v1 active" in viewer
    assert 'id="publish-form"' not in viewer and 'id="deactivate-button"' not in viewer
    assert 'id="publish-form"' in publisher and 'id="deactivate-button"' in publisher


# --- diff ---------------------------------------------------------------------------------------


def test_the_diff_shows_changed_lines_side_by_side_with_the_rule_summary(clients, users, seed003):
    services.policy_publish(
        actor=users["publisher"], policy=seed003, message="v1", revision=seed003.draft_revision
    )
    seed003.refresh_from_db()
    changed = seed003.draft.replace("weight: 1", "weight: 3") + (
        "  - name: fewer-pods\n    expression: 100 - node.podCount\n"
    )
    services.policy_update_draft(
        actor=users["editor"], policy=seed003, document=changed, if_match=seed003.etag
    )
    html = (
        clients["viewer"]
        .get("/policies/seed-003-name-length/versions/1/diff/draft")
        .content.decode()
    )
    assert 'data-rule-change="added">+ scores/fewer-pods' in html
    assert 'data-rule-change="changed">~ scores/short-node-name' in html
    assert "weight: <mark>1</mark>" in html and "weight: <mark>3</mark>" in html
    assert html.count('class="pg-diff-insert"') == 2


def test_the_diff_pairs_a_changed_weight_with_its_own_rule_not_an_added_ones(
    clients, users, seed003
):
    """A plain LCS matched the old `weight: 1` with the added score's `weight: 1` and showed
    the first score's tail as inserted; aligned by rule, the weight is one replaced line."""
    added = (
        "  - name: fewer-pods\n    expression: 100 - node.podCount\n    weight: 1\n"
        "    normalize: minmax\n"
    )
    _published_with_a_changed_draft(
        users, seed003, seed003.draft.replace("weight: 1", "weight: 2") + added
    )
    html = (
        clients["viewer"]
        .get("/policies/seed-003-name-length/versions/1/diff/draft")
        .content.decode()
    )
    assert html.count('class="pg-diff-replace"') == 1
    assert "weight: <mark>1</mark>" in html and "weight: <mark>2</mark>" in html
    assert html.count('class="pg-diff-insert"') == len(added.splitlines())
    assert html.count('class="pg-diff-delete"') == 0


@pytest.mark.parametrize("path", ["diff/", "diff"])  # with a slash like versions/ and tests/
def test_the_diff_pickers_lead_to_the_canonical_url(clients, seed003, path):
    response = clients["viewer"].get(f"/policies/seed-003-name-length/{path}?a=draft&b=draft")
    assert response.status_code == 302
    assert response["Location"] == "/policies/seed-003-name-length/versions/draft/diff/draft"


def test_the_diff_pickers_and_the_diff_tab_use_the_address_with_a_slash(clients, seed003):
    html = clients["viewer"].get("/policies/seed-003-name-length/versions/").content.decode()
    assert 'href="/policies/seed-003-name-length/diff/"' in html  # the tab, nothing published
    for path in ("versions/", "tests/", "diff/"):
        assert clients["viewer"].get(f"/policies/seed-003-name-length/{path}").status_code in (
            200,
            302,
        )


@pytest.mark.parametrize("ref", ["7", "latest"])
def test_a_diff_with_an_unknown_side_is_a_404(clients, seed003, ref):
    url = f"/policies/seed-003-name-length/versions/{ref}/diff/draft"
    assert clients["viewer"].get(url).status_code == 404


@pytest.mark.parametrize(
    ("old", "new", "kinds", "counts"),
    [
        # one line changed in the middle: equal, replace, equal
        ("a\nb\nc", "a\nB\nc", ["equal", "replace", "equal"], (0, 0, 1)),
        # a line added at the end and one removed at the start
        ("x\na\nb", "a\nb\ny", ["delete", "equal", "equal", "insert"], (1, 1, 0)),
        # 20 equal lines before a change: the first 20 - 3 of context fold into one row
        (
            "\n".join(map(str, range(20))) + "\nold",
            "\n".join(map(str, range(20))) + "\nnew",
            ["fold", "equal", "equal", "equal", "replace"],
            (0, 0, 1),
        ),
    ],
)
def test_side_by_side_rows_pair_lines_and_fold_long_unchanged_runs(old, new, kinds, counts):
    diff = side_by_side(old=old, new=new)
    assert [r["kind"] for r in diff["rows"]] == kinds
    assert (diff["added"], diff["removed"], diff["changed"]) == counts


# --- preview of all pending pods ---------------------------------------------------------------


def test_all_pending_pods_are_previewed_by_the_celery_task(
    clients, users, seed003, isolated_redis, eager_celery
):
    response = clients["viewer"].post(
        "/policies/seed-003-name-length/preview-all", {"document": seed003.draft}, **HTMX
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-status="done"' in html  # eager: the job finished inside the request
    rows = re.findall(r'<td class="mono"><a href="[^"]*">([^<]+)</a></td>', html)
    assert sorted(rows) == pending_pods()
    # seed-003 admits pod names shorter than 5 characters only: those land on kube-scheduler's
    # pick, the others are unschedulable (or pass through the policy: another scheduler)
    for ref in pending_pods():
        name = ref.split("/")[1]
        row = html[html.index(f">{ref}</a>") :].split("</tr>")[0]
        pick = re.search(r'<td class="mono pg-pick">(.*?)</td>', row).group(1)
        if len(name) < 5:
            assert pick.strip() == kube_pick(seed003.draft, ref)[0]
        else:
            assert "unschedulable" in pick or "passes through" in row


def test_the_background_preview_names_kube_schedulers_pick_and_no_second_winner(
    clients, users, seed003, isolated_redis, eager_celery
):
    # seed-003's top score for short names is cp-1, which kube-scheduler never picks (its
    # taint): the one answer per pod is the pick, with its feasible count and reasons
    html = (
        clients["viewer"]
        .post("/policies/seed-003-name-length/preview-all", {"document": seed003.draft}, **HTMX)
        .content.decode()
    )
    assert "kube-scheduler picks</th>" in html
    assert "choice" not in html and "winner" not in html.lower()
    for ref in [ref for ref in pending_pods() if len(ref.split("/")[1]) < 5]:
        row = html[html.index(f">{ref}</a>") :].split("</tr>")[0]
        pick = re.search(r'<td class="mono pg-pick">([^<]+)', row).group(1).strip()
        assert pick == kube_pick(seed003.draft, ref)[0] != shortest_node()


def test_the_background_preview_in_compare_mode_lists_the_pods_that_would_move(
    clients, users, seed003, isolated_redis, eager_celery
):
    services.policy_publish(
        actor=users["publisher"], policy=seed003, message="v1", revision=seed003.draft_revision
    )

    def run(document: str) -> str:
        return (
            clients["viewer"]
            .post(
                "/policies/seed-003-name-length/preview-all",
                {"document": document, "compare": "1"},
                **HTMX,
            )
            .content.decode()
        )

    flipped = run(seed003.draft.replace("20 - size(node.name)", "size(node.name)"))
    admitted = [ref for ref in pending_pods() if len(ref.split("/")[1]) < 5]
    assert (
        f"<strong>{len(admitted)}</strong> would move (their pick, feasible nodes or reasons "
        "change) compared with v1"
    ) in flipped
    for ref in admitted:
        row = flipped[flipped.index(f">{ref}</a>") :].split("</tr>")[0]
        assert kube_pick(seed003.draft, ref)[0] in row and ">moves</span>" in row
        assert re.search(r"\b27 feasible\b", row)  # the published side: pick, feasible nodes
    # a one-line change that moves no pod says so in one line
    same = run(cp1_scores_more(seed003.draft))
    summary = re.search(r'<p class="pg-all-summary" id="preview-all-summary">(.*?)</p>', same)
    assert summary.group(1).endswith(
        ": no pod moves: every pick, feasible set and reason stays as with v1."
    )
    assert ">moves</span>" not in same


def test_progress_is_polled_until_the_job_is_done(clients, seed003, isolated_redis):
    # not eager, and no worker: the job stays queued and the page keeps polling it
    from unittest import mock

    with mock.patch.object(preview_all_pending, "delay"):
        response = clients["viewer"].post(
            "/policies/seed-003-name-length/preview-all", {"document": seed003.draft}, **HTMX
        )
    html = response.content.decode()
    assert 'hx-trigger="every 300ms"' in html and 'data-status="queued"' in html
    poll = re.search(r'hx-get="([^"]+)"', html).group(1)
    job = poll.rstrip("/").split("/")[-1].replace("-", "")
    jobs.preview_job_run(job_id=job)  # what the worker does
    done = clients["viewer"].get(poll, **HTMX).content.decode()
    assert 'data-status="done"' in done and "every 300ms" not in done


def test_someone_elses_job_is_not_shown(clients, seed003, isolated_redis):
    from unittest import mock

    with mock.patch.object(preview_all_pending, "delay"):
        html = (
            clients["viewer"]
            .post("/policies/seed-003-name-length/preview-all", {"document": seed003.draft}, **HTMX)
            .content.decode()
        )
    poll = re.search(r'hx-get="([^"]+)"', html).group(1)
    other = clients["editor"].get(poll, **HTMX).content.decode()
    assert "unknown or expired" in other


def test_a_redis_outage_is_said_in_words(clients, seed003, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    redis_client.cache_clear()
    try:
        response = clients["viewer"].post(
            "/policies/seed-003-name-length/preview-all", {"document": seed003.draft}, **HTMX
        )
    finally:
        redis_client.cache_clear()
    assert response.status_code == 422
    assert b"Redis is unavailable, so background previews cannot run" in response.content


# --- kube-scheduler around the policy (issue 16) -------------------------------------------------


def _row(html: str, node: str) -> str:
    start = html.rindex("<tr", 0, html.index(f'data-node="{node}"'))
    return html[start : html.index("</tr>", start)]


def test_the_table_groups_final_kube_scheduler_and_policy_columns(clients, seed003):
    html = preview(clients["viewer"], seed003.draft, pod="default/abc").content.decode()
    groups = re.findall(
        r'class="pg-group pg-group--\w+(?: pg-col-detail)?" data-nosort>([^<]+)<', html
    )
    assert groups == ["final", "kube-scheduler", "policy", "policy rules", "plugins"]
    for key in (
        "final",
        "filters",
        "plugins",
        "verdict",
        "total",
        "policy-rank",
        "NodeResourcesFit",
    ):
        assert f'data-key="{key}"' in html
    assert ">Policy score</th>" in html and ">Policy rank</th>" in html
    # each rule's and plugin's column is there, hidden until "All columns" is ticked
    assert 'class="num pg-col-detail" data-key="short-node-name"' in html
    assert 'id="nodes-all-columns"' in html


def test_the_demo_with_seed_003_has_one_answer_in_the_playground(clients, seed003):
    # Issue 23: the policy's top score over every node is cp-1, a tainted control-plane node
    # kube-scheduler rejects; its pick is the answer everywhere on the page. The policy's own
    # ranking is a column (policy score, policy rank), never a second winner.
    html = preview(clients["editor"], seed003.draft, pod="default/abc").content.decode()
    (pick,) = kube_pick(seed003.draft)
    assert pick == "c-mem-1" != shortest_node()
    assert f'id="summary-pick" title="{pick}">{pick}' in html
    assert re.findall(r'<tr class="pg-row-pick[^"]*" data-node="([^"]+)"', html) == [pick]
    starred = [n for n in demo_names() if "pg-winner" in _row(html, n)]
    assert starred == [pick]  # the one star in the table
    for word in (
        "Policy's choice",
        "policy&#x27;s choice",
        "summary-winner",
        "preferred",
        "Winner",
    ):
        assert word not in html
    # the status line, the advisor and the pins speak of the same pick
    assert f'lands on <strong class="mono">{pick}</strong>' in html
    advice = html[html.index('id="weight-advice"') :].split("</div>")[0]
    assert "kube-scheduler picks one of the nodes the policy scores highest" in advice
    assert f'value="pick" checked> lands in {pick}' in html
    # the pick is the policy's rank 1 among the nodes kube-scheduler sends it; cp-1 is not sent
    picked = _row(html, pick)
    assert 'data-label="policy rank">1</td>' in picked
    assert "not sent" in _row(html, "cp-1") and 'data-label="policy rank"><span' in _row(
        html, "cp-1"
    )


def test_the_policys_tainted_favourite_is_not_kube_schedulers_pick(clients, seed003):
    # seed-003 prefers the shortest name, cp-1: a control-plane node whose NoSchedule taint the
    # pod does not tolerate. kube-scheduler rejects it and picks among the nodes it passes.
    html = preview(clients["viewer"], seed003.draft, pod="default/abc").content.decode()
    pick = re.search(r'id="summary-pick" title="([^"]*)"', html).group(1)
    assert pick and "cp-1" not in pick.split(", ")
    cp1 = _row(html, "cp-1")
    assert "TaintToleration</span>: node(s) had untolerated taint" in cp1
    assert "not sent" in cp1  # the extender never sees it
    picked = _row(html, pick.split(", ")[0])
    assert "pg-row-pick" in picked and 'class="pg-stack"' in picked
    # the bar: kube-scheduler's plugins and the policy, as parts of the best final total
    assert picked.count('class="pg-seg pg-seg--') == 2


def test_every_row_has_a_drill_down_with_its_arithmetic(clients, seed003):
    html = preview(clients["viewer"], seed003.draft, pod="default/abc").content.decode()
    assert html.count('class="pg-drill" data-drill=') == len(demo_names())
    drill = html[html.index('data-drill="cp-1"') :]
    drill = drill[: drill.index("</section>")]
    assert "Labels" in drill and "node-role.kubernetes.io/control-plane" in drill
    assert "rejected by <span class='mono'>TaintToleration</span>" in drill
    assert "allocatable" in drill
    # the policy's part is never a bare dash: cp-1 is not sent, its arithmetic over every node
    policy = drill[drill.index("<h5>Policy</h5>") :]
    assert "Not sent to the policy: kube-scheduler&#x27;s" in policy or (
        "Not sent to the policy: kube-scheduler's" in policy
    )
    assert "<span class='mono'>short-node-name</span>: raw 16 → normalized 100" in policy
    assert "<li class=faint>—</li>" not in drill


def test_the_drill_down_shows_the_policys_variable_values(clients, seed003):
    html = preview(clients["viewer"], example("bin-packing")).content.decode()
    assert "<h5>Variables</h5>" in html
    assert "<dt class='mono'>freeCpu</dt>" in html


def test_the_playground_advises_the_extender_weight_for_this_pod_and_the_examples(clients, seed003):
    html = preview(clients["viewer"], example("bin-packing")).content.decode()
    advice = html[html.index('id="weight-advice"') :]
    advice = advice[: advice.index("</div>")]
    pod_weight = int(re.search(r'data-pod-weight="(\d+)"', advice).group(1))
    examples_weight = int(re.search(r'data-examples-weight="(\d+)"', advice).group(1))
    # on the demo cluster bin-packing is outvoted at the weight schedulerconfig prints (1)
    assert max(pod_weight, examples_weight) > 1
    assert "pg-advice--outvoted" in advice and "is too low" in advice


def test_an_invalid_keystroke_logs_no_server_warning_but_other_refusals_still_do(
    clients, seed003, caplog
):
    import logging

    caplog.set_level(logging.INFO, logger="django.request")
    response = clients["editor"].post(
        "/policies/seed-003-name-length/preview",
        {"document": "name: [", "pod": "default/abc", "revision": "1", "seq": "1"},
        **HTMX,
    )
    assert response.status_code == 422
    assert [r for r in caplog.records if r.name == "django.request"] == []
    stale = clients["editor"].post(
        "/policies/seed-003-name-length/draft", {"document": seed003.draft, "if_match": "0"}, **HTMX
    )
    assert stale.status_code == 412
    assert [r.status_code for r in caplog.records if r.name == "django.request"] == [412]


# --- pod search ---------------------------------------------------------------------------------


def test_the_pod_search_lists_matching_pods_as_buttons(clients, seed003, demo_cluster):
    html = (
        clients["viewer"]
        .get("/policies/seed-003-name-length/pods", {"q": "web/ app=frontend"})
        .content.decode()
    )
    found = re.findall(r'data-pod="([^"]+)"', html)
    assert found and all(p.startswith("web/frontend-") for p in found)
    none = clients["viewer"].get("/policies/seed-003-name-length/pods", {"q": "zzz-nothing"})
    assert b"No pod matches" in none.content
    bad = clients["viewer"].get("/policies/seed-003-name-length/pods", {"q": "x" * 600})
    assert bad.status_code == 200 and b"at most 506 characters" in bad.content


def test_each_example_in_the_pod_searchs_placeholder_finds_pods_on_the_demo(
    clients, seed003, demo_cluster
):
    html = clients["viewer"].get("/policies/seed-003-name-length/").content.decode()
    [placeholder] = re.findall(r'id="pod-search"[^>]*placeholder="Find: ([^"]+)"', html)
    examples = placeholder.split(", ")
    assert len(examples) == 3  # a name, a namespace, a label
    for query in examples:
        found = re.findall(
            r'data-pod="([^"]+)"',
            clients["viewer"]
            .get("/policies/seed-003-name-length/pods", {"q": query})
            .content.decode(),
        )
        assert found, query


def _opening_pod(html: str) -> str:
    [selected] = re.findall(r'<option value="([^"]+)" selected>', html.split('id="pod-select"')[1])
    return selected


def test_the_playground_opens_on_a_targeted_pod_the_policy_leaves_a_node_for(
    clients, seed003, demo_cluster
):
    from policies.cluster.loaded import pod_from_cluster
    from policies.evaluation import policy_leaves_a_node

    cluster = cluster_load("demo")
    pending = sorted(
        (p["namespace"], p["name"])
        for p in cluster.state.pods()
        if not p["nodeName"] and p["phase"] == "Pending" and p["schedulerName"] == "schedweb"
    )
    # the first targeted pending pod is one seed 003 rejects on every node (a long name) ...
    first = pod_from_cluster(cluster=cluster, namespace=pending[0][0], name=pending[0][1])
    assert not policy_leaves_a_node(document=seed003.draft, pod=first, cluster=cluster)
    # ... so the playground opens on the first one it leaves a node for: default/abc, the pod
    # the document's comment names (abc.yaml)
    html = clients["viewer"].get("/policies/seed-003-name-length/").content.decode()
    opened = _opening_pod(html)
    assert opened == "default/abc"
    namespace, name = opened.split("/")
    pod = pod_from_cluster(cluster=cluster, namespace=namespace, name=name)
    assert policy_leaves_a_node(document=seed003.draft, pod=pod, cluster=cluster)
    assert "Try it with policies/examples/pods/abc.yaml" in seed003.draft


def test_a_policy_that_rejects_every_pod_opens_on_the_first_targeted_one(
    clients, users, demo_cluster
):
    document = example("seed-003-name-length").replace("size(pod.name) < 5", "size(pod.name) < 0")
    document = document.replace("name: seed-003-name-length", "name: rejects-all", 1)
    services.policy_create(actor=users["editor"], document=document)
    html = clients["viewer"].get("/policies/rejects-all/").content.decode()
    assert _opening_pod(html) == "batch/report-sync"  # the first targeted pending pod


def test_a_slow_policy_opens_on_the_first_targeted_pod_under_the_request_guard(
    clients, seed003, demo_cluster, settings
):
    settings.SCHEDWEB_PREVIEW_SECONDS = 1e-9
    with deadline(None, clock=StepClock()):
        html = clients["viewer"].get("/policies/seed-003-name-length/").content.decode()
    assert _opening_pod(html) == "batch/report-sync"


def test_a_searched_pod_opens_by_its_name_not_as_missing(clients, seed003, demo_cluster):
    html = (
        clients["viewer"]
        .get("/policies/seed-003-name-length/", {"pod": "kube-system/kube-proxy-h2m6h"})
        .content.decode()
    )
    assert "kube-system/kube-proxy-h2m6h</option>" in html
    assert "not in the snapshot" not in html


def test_the_cluster_pages_preview_link_opens_policies_on_that_pod_targeting_ones_first(
    clients, users, seed003, demo_cluster
):
    cluster_html = clients["viewer"].get("/cluster/").content.decode()
    assert 'href="/policies/?pod=default%2Fabcdefg"' in cluster_html
    other = example("bin-packing").replace("schedulerNames: [schedweb]", "schedulerNames: [other]")
    services.policy_create(actor=users["editor"], document=other)
    html = clients["viewer"].get("/policies/", {"pod": "default/abcdefg"}).content.decode()
    assert 'id="preview-pod-banner"' in html and 'its scheduler <span class="mono">schedweb' in html
    links = re.findall(r'class="mono pg-policy-link" href="([^"]+)"', html)
    assert links == [
        "/policies/seed-003-name-length/?pod=default%2Fabcdefg",
        "/policies/bin-packing/?pod=default%2Fabcdefg",
    ]


def test_test_cases_run_under_the_request_guard(clients, seed003, settings):
    add_test(clients["editor"], seed003.draft)
    settings.SCHEDWEB_PREVIEW_SECONDS = 1e-9
    # a clock that moves a second each time it is read: the first look past the start is late
    with deadline(None, clock=StepClock()):
        page = clients["viewer"].get("/policies/seed-003-name-length/tests/")
    assert page.status_code == 200
    assert b"The test cases could not run: the policy took longer than" in page.content


# --- what-if edits ------------------------------------------------------------------------------


def _preview(client, document: str, **extra) -> str:
    data = {"document": document, "pod": "default/abc", "revision": "1", "seq": "1", **extra}
    return client.post("/policies/seed-003-name-length/preview", data, **HTMX).content.decode()


def test_a_what_if_cordon_of_the_winner_moves_the_pick_for_this_preview_only(
    clients, seed003, demo_cluster
):
    plain = _preview(clients["viewer"], seed003.draft)
    pick = re.search(r'id="summary-pick"[^>]*>\s*([\w.-]+)', plain).group(1)
    edited = _preview(clients["viewer"], seed003.draft, what_if=f"- cordon: {pick}\n")
    assert 'id="what-if-applied"' in edited and f"cordon {pick}" in edited
    assert re.search(r'id="summary-pick"[^>]*>\s*([\w.-]+)', edited).group(1) != pick
    assert "NodeUnschedulable" in edited
    # the snapshot itself is untouched: the next preview without edits picks the same node
    again = _preview(clients["viewer"], seed003.draft)
    assert re.search(r'id="summary-pick"[^>]*>\s*([\w.-]+)', again).group(1) == pick


def test_a_bad_what_if_edit_says_which_and_why(clients, seed003, demo_cluster):
    html = _preview(clients["viewer"], seed003.draft, what_if="- cordon: no-such-node\n")
    assert (
        "Cannot evaluate this pod" in html
        and "whatIf[0].cordon: no node named no-such-node" in html
    )


def test_a_share_link_keeps_the_what_if_edits(clients, seed003, demo_cluster):
    answer = clients["viewer"].post(
        "/policies/seed-003-name-length/share",
        {"document": seed003.draft, "pod": "default/abc", "what_if": "- cordon: cp-1\n"},
        **HTMX,
    )
    token = re.search(r"/s/([^/]+)/", answer.content.decode()).group(1)
    page = clients["editor"].get(f"/policies/seed-003-name-length/?share={token}").content.decode()
    assert "- cordon: cp-1" in page and 'id="what-if-applied"' in page


# --- queue order -----------------------------------------------------------------------------


def test_a_document_with_a_queue_shows_the_pods_key_and_the_pending_pods_in_queue_order(
    clients, seed003
):
    html = preview(clients["viewer"], example("seed-002-queue")).content.decode()
    assert 'id="queue-order"' in html
    # default/abc is Burstable without groupPriority: 0*3 + 1 = 1
    assert 'id="queue-pod-key" data-key="1"' in html
    order = re.findall(r'data-queue-pod="([^"]+)"', html)
    assert sorted(order) == pending_pods()
    # the Guaranteed training pods (key 2) come before every Burstable pod (key 1)
    firsts = [ref for ref in order if ref.startswith("ml/train-llama-")]
    assert order[: len(firsts)] == firsts and len(firsts) == 3


def test_a_document_without_a_queue_has_no_queue_panel(clients, seed003):
    assert 'id="queue-order"' not in preview(clients["viewer"], seed003.draft).content.decode()
