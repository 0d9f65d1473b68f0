"""policies/ui/markdown.py: the subset of Markdown docs/policies.md uses, every character of the
source escaped. Pure: no database."""

from __future__ import annotations

import pytest

from policies.ui.markdown import inline, markdown_render, slugify


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("1. The policy document", "1-the-policy-document"),
        ("5b. Queue order (`queue:`)", "5b-queue-order-queue"),
        ("Around the policy: kube-scheduler's cycle", "around-the-policy-kube-schedulers-cycle"),
        ("`variables` and `cluster`", "variables-and-cluster"),
    ],
)
def test_a_headings_slug_is_githubs_anchor(heading, slug):
    assert slugify(heading.replace("`", "")) == slug
    assert markdown_render(f"## {heading}").headings[0].slug == slug


def test_a_repeated_heading_gets_a_numbered_slug_and_every_heading_a_link_to_itself():
    rendered = markdown_render("## Notes\n\ntext\n\n### Notes\n")
    assert [h.slug for h in rendered.headings] == ["notes", "notes-1"]
    assert '<h3 id="notes-1">Notes<a class="md-anchor" href="#notes-1"' in rendered.html


def test_every_character_of_the_source_is_escaped_in_text_code_tables_and_headings():
    source = (
        "# <script>alert(1)</script>\n\n"
        'Text <img src=x onerror="alert(1)"> & `<b>code</b>`\n\n'
        '| a | b |\n| --- | --- |\n| <i>x</i> | `"q"` |\n\n'
        "```yaml\nname: <svg onload=alert(1)>\n```\n"
    )
    out = markdown_render(source).html
    assert "<script" not in out and "<img" not in out and "<svg" not in out and "<i>" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert (
        "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; <code>&lt;b&gt;code&lt;/b&gt;</code>"
        in out
    )
    assert "name: &lt;svg onload=alert(1)&gt;" in out


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("[sec](#2-inputs)", '<a href="#2-inputs">sec</a>'),
        ("[k8s](https://kubernetes.io/docs/)", '<a href="https://kubernetes.io/docs/">k8s</a>'),
        ("[doc](docs/perf/x.md)", '<a href="docs/perf/x.md">doc</a>'),
        ("[x](javascript:alert(1))", "[x](javascript:alert(1))"),
        ("[x](JavaScript:alert(1))", "[x](JavaScript:alert(1))"),
        ("[x](data:text/html,hi)", "[x](data:text/html,hi)"),
        ("[x](//evil.example/)", "[x](//evil.example/)"),
        ('[x](#a"onmouseover="alert(1))', '<a href="#a&quot;onmouseover=&quot;alert(1">x</a>)'),
    ],
)
def test_links_keep_only_anchors_web_and_relative_addresses(source, expected):
    assert inline(source) == expected


def test_emphasis_and_strong_but_not_inside_code_or_between_operands():
    assert inline("**raw**: the *listed* value") == (
        "<strong>raw</strong>: the <em>listed</em> value"
    )
    assert inline("`x * 100 / total` and a * b * c") == (
        "<code>x * 100 / total</code> and a * b * c"
    )


def test_a_table_reads_an_escaped_bar_as_a_bar_even_in_code():
    out = markdown_render(
        "| Function | Signatures |\n| --- | --- |\n| conversions | `int(int\\|uint)`, `dyn(x)` |\n"
    ).html
    assert "<th>Function</th><th>Signatures</th>" in out
    assert "<td><code>int(int|uint)</code>, <code>dyn(x)</code></td>" in out


def test_lists_nest_by_indentation_and_continue_on_indented_lines():
    source = (
        "1. **raw**: the value.\n"
        "2. **normalized** to 0..100:\n"
        "   - `none`: clamped,\n"
        "     then kept.\n"
        "   - `minmax`: scaled.\n"
        "3. weighted\n\n"
        "- a\n  b\n- c\n"
    )
    out = markdown_render(source).html
    assert out == (
        "<ol><li><strong>raw</strong>: the value.</li>"
        "<li><strong>normalized</strong> to 0..100:\n"
        "<ul><li><code>none</code>: clamped,\nthen kept.</li><li><code>minmax</code>: scaled.</li>"
        "</ul></li><li>weighted</li></ol>\n"
        "<ul><li>a\nb</li><li>c</li></ul>"
    )


def test_code_blocks_are_listed_with_their_language_line_section_and_actions():
    source = "## Funcs\n\n```cel\n1 + 1 // => 2\n```\n\n```sh\nls\n```\n"
    rendered = markdown_render(source, code_actions=lambda b: f"<b>{b.index}</b>")
    first, second = rendered.blocks
    assert (first.language, first.text, first.line, first.section) == (
        "cel",
        "1 + 1 // => 2\n",
        3,
        "funcs",
    )
    assert (second.index, second.language, second.line) == (1, "sh", 7)
    assert (
        '<div class="md-code" id="example-0" data-lang="cel"><pre tabindex="0"><code>1 + 1 // =&gt; 2\n'
        in (rendered.html)
    )
    assert "</code></pre><b>0</b></div>" in rendered.html


def test_a_paragraph_joins_its_lines_and_a_link_may_span_them():
    out = markdown_render("See [7 Trying a\npolicy](#7-trying-a-policy) now.\n\nNext.").html
    assert out == (
        '<p>See <a href="#7-trying-a-policy">7 Trying a\npolicy</a> now.</p>\n<p>Next.</p>'
    )
