"""The language reference in the product (policies/ui/reference.py): docs/policies.md served at
/help/policies/ to signed-in users, every runnable example valid as the reference says, and each
"Try in playground" opening the playground with exactly that example, unsaved."""

from __future__ import annotations

import html
import re

import pytest

from policies import services
from policies.cluster.manifest import pod_view_from_text
from policies.engine.policy import validate_policy
from policies.models import Policy
from policies.ui.reference import REFERENCE, cel_document, reference
from tests.conftest import client_for, make_user

from .test_policy_pages import example

pytestmark = pytest.mark.django_db
EXAMPLES = reference()[1]
_INVALID = re.compile(r"//\s*=>\s*invalid:")
_TRY = re.compile(r'data-try="(\d+)" href="([^"]*)"')


@pytest.fixture(autouse=True)
def demo(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"


@pytest.fixture
def clients():
    return {role: client_for(role) for role in ("viewer", "editor")}


@pytest.fixture
def seed003() -> Policy:
    editor = make_user("ed", "editor")
    return services.policy_create(actor=editor, document=example("seed-003-name-length"))


def _textarea(page: str, element_id: str) -> str:
    """A textarea's text as the browser reads it (the newline after the tag is dropped)."""
    found = re.search(rf'<textarea id="{element_id}"[^>]*>\n?(.*?)</textarea>', page, re.DOTALL)
    assert found, element_id
    return html.unescape(found.group(1))


def test_the_reference_needs_a_signed_in_user(client):
    response = client.get("/help/policies/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_the_reference_page_holds_every_section_of_the_doc_with_its_anchor(clients, seed003):
    page = clients["viewer"].get("/help/policies/").content.decode()
    headings = re.findall(r"^(##+) (.+)$", REFERENCE.read_text(encoding="utf-8"), re.MULTILINE)
    assert len(headings) > 30
    for marks, text in headings:
        slug = re.sub(r"[^\w\- ]", "", text.replace("`", "").lower()).replace(" ", "-")
        assert f'<h{len(marks)} id="{slug}">' in page, text
        assert f'href="#{slug}" data-toc="{slug}"' in page, text
    assert 'id="reference-search"' in page and "js/reference.js" in page
    assert 'class="nav"' in page  # inside the app chrome


def test_every_cel_and_yaml_block_of_the_reference_is_runnable():
    blocks = re.findall(r"^```(\w*)\n", REFERENCE.read_text(encoding="utf-8"), re.MULTILINE)
    runnable = [lang for lang in blocks if lang in ("cel", "yaml")]
    assert len(EXAMPLES) == len(runnable) >= 15
    assert {e.kind for e in EXAMPLES.values()} == {"policy", "pod", "cel"}


@pytest.mark.parametrize("number", sorted(EXAMPLES))
def test_every_example_compiles_and_a_cel_line_fails_exactly_where_the_doc_says(number):
    example = EXAMPLES[number]
    if example.kind == "pod":
        assert pod_view_from_text(example.block.text)["name"] in ("train-0", "urgent")
        return
    if example.kind == "policy":
        assert validate_policy(example.block.text) == []
        return
    lines = [s for s in example.block.text.splitlines() if s.strip()]
    document = example.document(name="tryout")
    errors = validate_policy(document)
    wrong = {e.path for e in errors}
    said = {f"variables[{i}].expression" for i, s in enumerate(lines) if _INVALID.search(s)}
    assert wrong == said, [(e.path, e.message) for e in errors]
    for error in errors:  # the marker sits on the example's own line of the editor
        index = int(re.search(r"\[(\d+)\]", error.path).group(1))
        assert document.splitlines()[error.doc_line - 1].strip() == lines[index].strip()


def test_a_cel_example_becomes_variables_holding_its_lines_verbatim():
    text = '1 + 1                // => 2\n"a" + "b"  // => "ab"\n'
    assert cel_document(text, name="p", line=7) == (
        "# CEL example from the language reference (docs/policies.md, line 7).\n"
        "# Each line is a variable: a node's drill-down in the preview shows its value there.\n"
        "name: p\n"
        "schedulerNames: [schedweb]\n"
        "variables:\n"
        "  - name: example1\n    expression: |-\n      1 + 1                // => 2\n"
        '  - name: example2\n    expression: |-\n      "a" + "b"  // => "ab"\n'
        'filters:\n  - name: every-node\n    expression: "true"\n'
    )


def test_each_try_opens_the_playground_with_exactly_that_example_unsaved(clients, seed003):
    page = clients["editor"].get("/help/policies/?policy=seed-003-name-length").content.decode()
    links = {int(n): html.unescape(href) for n, href in _TRY.findall(page)}
    assert sorted(links) == sorted(EXAMPLES)
    draft = Policy.objects.get(pk=seed003.pk).draft
    for number, href in links.items():
        assert href == f"/policies/seed-003-name-length/?example={number}"
        opened = clients["editor"].get(href)
        assert opened.status_code == 200, href
        shown = opened.content.decode()
        example = EXAMPLES[number]
        assert 'id="example-banner"' in shown
        if example.kind == "pod":
            assert _textarea(shown, "pod-yaml") == example.block.text
            assert _textarea(shown, "policy-editor") == draft
        else:
            assert _textarea(shown, "policy-editor") == example.document(
                name="seed-003-name-length"
            )
            assert "saving would replace the draft" in shown
            assert 'id="saved-draft"' in shown  # the unsaved-changes flag compares with it
    assert Policy.objects.get(pk=seed003.pk).draft == draft  # nothing was saved


def test_try_opens_the_latest_policy_without_one_named_and_the_list_without_any(clients):
    page = clients["viewer"].get("/help/policies/").content.decode()
    assert {html.unescape(h) for _, h in _TRY.findall(page)} == {"/policies/#new-policy"}
    editor = make_user("ed", "editor")
    services.policy_create(actor=editor, document=example("seed-003-name-length"))
    services.policy_create(actor=editor, document=example("bin-packing"))
    latest = Policy.objects.order_by("-updated_at", "-pk").first().name
    page = clients["viewer"].get("/help/policies/?policy=no-such").content.decode()
    hrefs = {html.unescape(h).split("?")[0] for _, h in _TRY.findall(page)}
    assert hrefs == {f"/policies/{latest}/"}


@pytest.mark.parametrize("value", ["999", "x", "-1", "1" * 400])
def test_an_unknown_example_is_a_404_in_the_app_chrome(clients, seed003, value):
    response = clients["viewer"].get(f"/policies/seed-003-name-length/?example={value}")
    assert response.status_code == 404
    assert 'class="nav"' in response.content.decode()


def test_the_playground_links_to_the_reference(clients, seed003):
    page = clients["viewer"].get("/policies/seed-003-name-length/").content.decode()
    assert 'id="reference-link"' in page
    assert 'href="/help/policies/?policy=seed-003-name-length"' in page


@pytest.mark.parametrize(
    ("expression", "section"),
    [
        ("timestamp(1) > 0", "3-functions"),
        ('"a".format([]) == ""', "strings-and-regex-the-kubernetes-cel-libraries"),
        ('quantity("1").foo() == 1', "quantities"),
        ("pod.requests.cpuu > 1", "resources"),
        ('node.labelz["a"] == "b"', "node"),
        ('pod.labelz["a"] == "b"', "pod"),
        ('pod.labels["a"] < 3', "4-semantics-worth-knowing"),
        ("1 + 1.0 > 0", "4-semantics-worth-knowing"),
        ('math.greatest("a") == 1', "lists-and-math"),
        ("[1].sum(2) == 1", "lists-and-math"),
        ("cluster.countPods(1, {}) > 0", "cluster-helpers"),
        ("size(1) > 0", "standard-cel"),
    ],
)
def test_a_type_error_links_to_the_section_that_explains_what_it_names(expression, section):
    from policies.ui.reference import section_for

    document = (
        "name: x\nschedulerNames: [schedweb]\nfilters:\n  - name: f\n"
        f"    expression: '{expression}'\n"
    )
    [error] = validate_policy(document)
    assert error.kind == "type"
    assert section_for(error.message) == section
    assert section in {h.slug for h in reference()[0].headings}


def test_the_playgrounds_problem_list_links_a_type_error_to_the_reference(clients, seed003):
    document = seed003.draft.replace("size(pod.name) < 5", "pod.labels['tier'] < 5")
    answer = clients["viewer"].post(
        "/policies/seed-003-name-length/preview",
        {"document": document, "pod": "default/abc"},
        HTTP_HX_REQUEST="true",
    )
    assert answer.status_code == 422
    assert (
        '<a class="pg-problem-help" href="/help/policies/?policy=seed-003-name-length'
        '#4-semantics-worth-knowing" target="_blank" rel="noopener"'
    ) in answer.content.decode()
