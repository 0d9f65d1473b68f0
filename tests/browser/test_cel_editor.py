"""The policy editor (static/js/cel-editor.js) in a real browser, on the component gallery.

Positions are 1-based lines and columns of the gallery's sample policy (policies/ui/gallery.py):
  line 9:  `    expression: node.allocatable.cpu - node.requested.cpu`
  line 14: `    expression: variables.freeCpu >= pod.requests.cpu`
  4 spaces + "expression: " (12 characters) = 16, so the value starts at column 17; on line 14
  `variables` is columns 17-25, the dot 26, and `freeCpu` starts at column 27.
"""

from __future__ import annotations

import statistics

import pytest
from playwright.sync_api import expect

from policies.engine.policy import validate_policy
from policies.ui.completions import cel_completions
from policies.ui.gallery import SAMPLE_POLICY

EDITOR = "#policy-editor"


def _value(page) -> str:
    return page.locator(EDITOR).input_value()


def _line(page, n: int) -> str:
    return _value(page).split("\n")[n - 1]


def _go(page, line: int, column: int = 10_000) -> None:
    """Caret to (line, column); a column past the end means the end of the line."""
    page.evaluate("([l, c]) => CelEditor.get('#policy-editor').goTo(l, c)", [line, column])


def _options(page) -> list[str]:
    return page.locator(".ce-complete [role=option] .ce-option-name").all_inner_texts()


def _highlighted(page, n: int, cls: str) -> list[str]:
    return page.locator(f".ce-highlight .ce-line:nth-child({n}) .{cls}").all_inner_texts()


def _record(page, event: str) -> None:
    page.evaluate(
        """(name) => {
          window.seen = window.seen || {};
          window.seen[name] = [];
          document.addEventListener(name, (e) => window.seen[name].push(e.detail));
        }""",
        event,
    )


# -- highlighting ------------------------------------------------------------------------------
def test_the_overlay_shows_exactly_the_textarea_text(gallery):
    shown = gallery.evaluate(
        "[...document.querySelectorAll('.ce-highlight .ce-line')].map((d) => d.textContent)"
    )
    assert shown == SAMPLE_POLICY.split("\n")


@pytest.mark.parametrize(
    ("line", "cls", "tokens"),
    [
        (1, "tok-key", ["name"]),
        (3, "tok-comment", ["# other schedulers' pods pass through untouched"]),
        (9, "tok-root", ["node", "node"]),
        (9, "tok-field", ["allocatable", "cpu", "requested", "cpu"]),
        (9, "tok-op", ["-"]),
        (11, "tok-str", ['"topology.kubernetes.io/zone"']),
        (14, "tok-root", ["variables", "pod"]),
        (14, "tok-op", [">="]),
        # CEL inside a single-quoted YAML string: the quotes are YAML, the rest is CEL
        (15, "tok-func", ["string", "string"]),
        (15, "tok-str", ['"needs "', '"m CPU, "', '"m free"']),
        (16, "tok-const", ["true"]),
        (18, "tok-macro", ["all"]),
        (18, "tok-op", ["!", "&&", "!="]),
        (22, "tok-num", ["2"]),
        # a block scalar (`expression: |`) is CEL on its more-indented lines
        (26, "tok-num", ["0", "0"]),
        (26, "tok-op", ["==", "?", ":"]),
        (27, "tok-field", ["requested", "nvidia_com_gpu", "allocatable", "nvidia_com_gpu"]),
        (29, "tok-value", ["minmax"]),
    ],
)
def test_it_highlights_yaml_and_the_cel_inside_it(gallery, line, cls, tokens):
    assert _highlighted(gallery, line, cls) == tokens


def test_highlighting_follows_typing(gallery):
    _go(gallery, 6)
    gallery.keyboard.type(" && size(pod.labels) < 3")
    assert _highlighted(gallery, 6, "tok-func") == ["size"]
    assert _highlighted(gallery, 6, "tok-num") == ["0", "3"]
    assert _line(gallery, 6).endswith("> 0 && size(pod.labels) < 3")


# -- markers -----------------------------------------------------------------------------------
def test_a_marker_underlines_its_line_and_column_and_explains_itself(gallery):
    gallery.evaluate(
        """CelEditor.get('#policy-editor').setMarkers([
             {line: 14, column: 27, severity: 'error', message: "undefined field 'freeCpux'",
              source: 'filters[0].expression'}])"""
    )
    # freeCpu starts at column 27 of line 14 (see the module docstring); the squiggle covers the word
    mark = gallery.locator(".ce-highlight .ce-line:nth-child(14) .ce-mark--error")
    assert mark.inner_text() == "freeCpu"
    assert (
        gallery.locator(".ce-gutter .ce-ln:nth-child(14)").get_attribute("data-severity") == "error"
    )
    assert gallery.locator(".ce-gutter [data-severity]").count() == 1  # the samples are replaced
    assert gallery.locator(".ce-counts").inner_text() == "1 error"

    box = mark.bounding_box()
    gallery.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    tooltip = gallery.locator(".ce-tooltip")
    tooltip.wait_for(state="visible")
    assert tooltip.inner_text() == "×\nundefined field 'freeCpux'"

    problem = gallery.locator(".ce-problems .ce-problem")
    assert problem.inner_text().split("\n")[-1].endswith("Ln 14, Col 27")
    problem.click()
    selected = gallery.evaluate(
        """(() => { const t = document.querySelector('#policy-editor');
                    return [document.activeElement === t, t.value.slice(t.selectionStart, t.selectionEnd)]; })()"""
    )
    assert selected == [True, "freeCpu"]
    assert gallery.locator(".ce-pos").inner_text() == "Ln 14, Col 27"


def test_markers_past_the_end_of_a_line_or_document_still_show(gallery):
    gallery.evaluate(
        """CelEditor.get('#policy-editor').setMarkers([
             {line: 1, column: 99, severity: 'warning', message: 'end of line'},
             {line: 500, column: 1, severity: 'info', message: 'past the end'},
             {line: 'x', message: 'ignored: no line'}])"""
    )
    assert gallery.locator(".ce-line:nth-child(1) .ce-mark--warning").count() == 1
    assert gallery.locator(".ce-problems .ce-problem").count() == 2
    last = gallery.locator(".ce-highlight .ce-line").count()
    assert (
        gallery.locator(f".ce-gutter .ce-ln:nth-child({last})").get_attribute("data-severity")
        == "info"
    )


def test_no_markers_reads_as_no_problems(gallery):
    gallery.evaluate("CelEditor.get('#policy-editor').setMarkers([])")
    assert gallery.locator(".ce-counts").inner_text() == "✓ No problems"
    assert gallery.locator(".ce-problems").is_hidden()
    assert gallery.locator(".ce-mark").count() == 0


def test_markers_from_a_stale_answer_are_ignored(gallery):
    swap = """([revision, message]) => {
      const div = document.createElement('div');
      div.innerHTML = `<script type="application/json" data-cel-markers-for="policy-editor"
        data-revision="${revision}">[{"line": 2, "column": 1, "message": "${message}"}]</script>`;
      document.body.appendChild(div);
      document.dispatchEvent(new CustomEvent('htmx:load', {detail: {elt: div}}));
    }"""
    _go(gallery, 2)
    gallery.keyboard.type("ab")  # two edits: revision 2
    revision = gallery.evaluate("CelEditor.get('#policy-editor').revision")
    gallery.evaluate(swap, [revision - 1, "stale"])
    messages = gallery.locator(".ce-problems .ce-problem-message")
    assert "stale" not in messages.all_inner_texts()
    gallery.evaluate(swap, [revision, "current"])
    assert messages.all_inner_texts() == ["current"]


# -- completion --------------------------------------------------------------------------------
def test_typing_node_dot_offers_node_fields_and_enter_inserts_one(gallery):
    node_fields = [f["name"] for f in cel_completions()["node"]]
    _go(gallery, 9)
    gallery.keyboard.type(" + node.")
    assert _options(gallery) == node_fields
    # the highlighted option is announced (a textarea may not carry aria-expanded)
    assert gallery.locator(EDITOR).get_attribute("aria-activedescendant").endswith("-opt-0")

    gallery.keyboard.type("al")  # prefix filter
    assert _options(gallery) == ["allocatable"]
    gallery.keyboard.press("Enter")
    assert _line(gallery, 9).endswith("node.requested.cpu + node.allocatable")
    assert gallery.locator(".ce-complete").is_hidden()

    gallery.keyboard.type(".")  # a resource map offers resources
    assert _options(gallery)[:2] == ["cpu", "memory"]
    gallery.keyboard.press("ArrowDown")
    gallery.keyboard.press("Tab")
    assert _line(gallery, 9).endswith(" + node.allocatable.memory")
    assert _highlighted(gallery, 9, "tok-field")[-1] == "memory"


def test_completion_closes_with_escape_and_undo_removes_an_insertion(gallery):
    _go(gallery, 9)
    gallery.keyboard.type(" + pod.")
    gallery.keyboard.press("Escape")
    assert gallery.locator(".ce-complete").is_hidden()
    gallery.keyboard.type("na")
    gallery.keyboard.press("Enter")  # `na` narrows pod fields to name and namespace
    assert _line(gallery, 9).endswith(" + pod.name")
    gallery.keyboard.press("Control+z")
    assert _line(gallery, 9).endswith(" + pod.na")


def test_clicking_an_option_inserts_it(gallery):
    _go(gallery, 9)
    gallery.keyboard.type(" + node.")
    gallery.locator(".ce-complete [role=option]", has_text="podCount").click()
    assert _line(gallery, 9).endswith(" + node.podCount")
    assert gallery.evaluate("document.activeElement.id") == "policy-editor"


def test_variables_dot_offers_the_variables_this_document_declares(gallery):
    _go(gallery, 14)
    gallery.keyboard.type(" && variables.")
    assert _options(gallery) == ["freeCpu", "zone"]
    assert (
        gallery.locator(".ce-complete-doc").inner_text()
        == "= node.allocatable.cpu - node.requested.cpu"
    )


def test_a_cluster_helper_is_inserted_with_its_parentheses(gallery):
    _go(gallery, 14)
    gallery.keyboard.type(" && cluster.countPodsOn")
    gallery.keyboard.press("Enter")
    caret = gallery.evaluate("document.querySelector('#policy-editor').selectionStart")
    value = _value(gallery)
    assert value[:caret].endswith("cluster.countPodsOnNode(")
    assert value[caret] == ")"


@pytest.mark.parametrize(
    ("line", "typed"),
    [
        (2, " node."),  # description: is plain YAML, not CEL
        (11, ' + "node.'),  # inside a CEL string
        (3, " node."),  # after a comment
    ],
)
def test_no_completion_outside_cel_code(gallery, line, typed):
    _go(gallery, line)
    gallery.keyboard.type(typed)
    assert gallery.locator(".ce-complete").is_hidden()


@pytest.mark.parametrize(
    ("typed", "partial"),
    [
        (' && node.labels["zone"].st', "st"),  # a map's value: a string
        (" && pod.name.", ""),
        (" && 'abc'.", ""),  # a string literal
    ],
)
def test_strings_offer_their_methods_after_an_index_or_a_literal(gallery, typed, partial):
    _go(gallery, 14)
    gallery.keyboard.type(typed)
    options = _options(gallery)
    assert options[0] == "startsWith" if partial else "startsWith" in options


@pytest.mark.parametrize(("line", "column"), [(1, 1), (13, 5), (14, 5)])
def test_ctrl_space_on_a_yaml_key_offers_nothing(gallery, line, column):
    _go(gallery, line, column)
    gallery.keyboard.press("Control+Space")
    assert gallery.locator(".ce-complete").is_hidden()


def test_ctrl_space_offers_the_roots_where_no_dot_was_typed(gallery):
    _go(gallery, 14)
    gallery.keyboard.type(" && no")
    gallery.keyboard.press("Control+Space")
    assert _options(gallery)[0] == "node"
    gallery.keyboard.press("Enter")
    assert _line(gallery, 14).endswith(">= pod.requests.cpu && node")


# -- keys --------------------------------------------------------------------------------------
def test_tab_indents_and_shift_tab_dedents(gallery):
    _go(gallery, 2, 1)
    gallery.keyboard.press("Tab")
    assert _line(gallery, 2).startswith("  description:")
    gallery.keyboard.press("Shift+Tab")
    assert _line(gallery, 2).startswith("description:")
    # several selected lines move together (a selection ending at column 1 would leave its
    # last line alone, as in other editors)
    _go(gallery, 5, 3)
    gallery.keyboard.press("Shift+ArrowDown")
    gallery.keyboard.press("Tab")
    assert [_line(gallery, 5), _line(gallery, 6)] == [
        "    - name: gpu-pods",
        "      expression: pod.requests.nvidia_com_gpu > 0",
    ]


def test_escape_then_tab_leaves_the_editor(gallery):
    gallery.locator(EDITOR).focus()
    gallery.keyboard.press("Escape")
    gallery.keyboard.press("Tab")
    assert gallery.evaluate("document.activeElement.id") != "policy-editor"
    assert _value(gallery) == SAMPLE_POLICY


def test_enter_keeps_the_indentation_of_a_list_item(gallery):
    _go(gallery, 5)  # `  - name: gpu-pods`
    gallery.keyboard.press("Enter")
    gallery.keyboard.type("expression: true")
    assert _line(gallery, 6) == "    expression: true"


def test_ctrl_enter_fires_the_preview_event(gallery):
    _record(gallery, "cel-editor:preview")
    gallery.locator(EDITOR).focus()
    gallery.keyboard.press("Control+Enter")
    seen = gallery.evaluate("window.seen['cel-editor:preview']")
    assert len(seen) == 1
    assert seen[0]["value"] == SAMPLE_POLICY  # Enter itself inserted nothing


def test_edits_fire_one_debounced_change_event(gallery):
    # the page's timers run on a clock the test moves (Playwright's), not on how fast the
    # keystrokes arrive: all three fall in one debounce, which ends 300 ms after the last
    gallery.clock.install()
    gallery.clock.pause_at(gallery.evaluate("Date.now()") + 1000)
    _record(gallery, "cel-editor:change")
    _go(gallery, 2)
    gallery.keyboard.type("abc")
    gallery.clock.run_for(300 - 1)
    assert gallery.evaluate("window.seen['cel-editor:change'].length") == 0  # still debouncing
    gallery.clock.run_for(1)
    assert gallery.evaluate("window.seen['cel-editor:change'].length") == 1
    gallery.clock.run_for(60_000)
    seen = gallery.evaluate("window.seen['cel-editor:change']")
    assert len(seen) == 1
    assert seen[0]["revision"] == 3  # one revision per typed character
    assert seen[0]["value"].split("\n")[1].endswith("GPU nodes.abc")


# -- the form and the live preview -------------------------------------------------------------
def test_the_form_posts_the_edited_text_and_the_answer_marks_the_error(gallery):
    _go(gallery, 14, 34)  # right after `freeCpu`
    gallery.keyboard.type("x")
    gallery.keyboard.press("Control+Enter")
    result = gallery.locator("#preview-result .alert-title")
    result.filter(has_text="problem").wait_for()
    # htmx applies the answer's markers when it settles, a moment after the swap.
    expect(gallery.locator(".ce-counts")).to_have_text("1 error")

    edited = _value(gallery)
    form_value = gallery.evaluate(
        "new FormData(document.querySelector('#policy-form')).get('document')"
    )
    assert form_value == edited
    expected = [(e.doc_line, e.doc_column, e.message) for e in validate_policy(edited)]
    shown = gallery.evaluate(
        "CelEditor.get('#policy-editor').markers.map((m) => [m.line, m.column, m.message])"
    )
    assert [tuple(m) for m in shown] == expected
    assert expected[0][0] == 14 and "freeCpux" in expected[0][2]
    assert gallery.locator(".ce-line:nth-child(14) .ce-mark--error").count() >= 1

    gallery.keyboard.press("Backspace")
    gallery.keyboard.press("Control+Enter")
    gallery.locator("#preview-ok").wait_for()
    expect(gallery.locator(".ce-counts")).to_have_text("✓ No problems")
    assert gallery.evaluate("CelEditor.get('#policy-editor').markers") == []


# -- speed -------------------------------------------------------------------------------------
def _big_document(lines: int) -> str:
    rule = [
        "  - name: rule-{i}",
        "    expression: node.allocatable.cpu - node.requested.cpu >= pod.requests.cpu * {i}",
        '    message: \'"rule {i}: " + string(node.podCount) + " pods"\'',
    ]
    out = ["name: big", "schedulerNames: [schedweb]", "filters:"]
    i = 0
    while len(out) < lines:
        out += [r.format(i=i) for r in rule]
        i += 1
    return "\n".join(out[:lines])


def test_typing_in_a_300_line_document_touches_only_the_typed_line(gallery):
    """What keeps typing fast however long the document: a keystroke re-highlights from the
    token cache and replaces the DOM of the one line typed in, not the document's 300. The
    milliseconds are printed, not asserted (speed targets live in `make bench`: a loaded CI
    machine must not fail this test for being slow)."""
    gallery.evaluate("(t) => CelEditor.get('#policy-editor').setValue(t)", _big_document(300))
    full = gallery.evaluate("CelEditor.get('#policy-editor').stats.lastRenderMs")
    _go(gallery, 150)
    timings, touched = [], []
    for _ in range(20):
        gallery.keyboard.type("1")
        stats = gallery.evaluate("CelEditor.get('#policy-editor').stats")
        timings.append(stats["lastInputMs"])
        touched.append(stats["lastInputLinesTouched"])
    print(
        f"300 lines: first render {full:.1f} ms, keystroke median {statistics.median(timings):.2f} ms,"
        f" max {max(timings):.2f} ms"
    )
    assert touched == [1] * 20
    assert gallery.locator(".ce-highlight .ce-line").count() == 300
