"""A small Markdown renderer for the subset docs/policies.md uses, so the language reference is
served from its one source without a dependency.

Blocks: ATX headings (with GitHub's anchor slugs, so the doc's own `#1-the-policy-document` links
work), paragraphs, bullet and numbered lists (nested by indentation, continuation lines), pipe
tables (`\\|` is a literal bar, as in GitHub's tables), fenced code. Inline: code spans, links
(`#anchor`, `http(s)://` and relative addresses; any other scheme is shown as text), `**strong**`,
`*emphasis*`. Everything else is text: every character from the document is HTML-escaped, so a
`<name>` in the doc is shown, never parsed.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^```\s*([\w+-]*)\s*$")
_ITEM = re.compile(r"^( *)([-*]|\d+\.)\s+(.*)$")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", re.DOTALL)
_EM = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])", re.DOTALL)
_SAFE_URL = re.compile(r"^(#|https?://|\.{0,2}/(?!/)|[\w.-]+(/|$|#))", re.IGNORECASE)


@dataclass(frozen=True)
class Heading:
    level: int
    text: str  # plain text, as the table of contents shows it
    slug: str  # the element's id: GitHub's anchor for the heading


@dataclass(frozen=True)
class CodeBlock:
    index: int  # 0-based, in document order
    language: str
    text: str
    line: int  # 1-based line of the opening fence
    section: str  # the slug of the heading the block is under ("" before the first)


@dataclass
class Rendered:
    html: str
    headings: list[Heading] = field(default_factory=list)
    blocks: list[CodeBlock] = field(default_factory=list)


def slugify(text: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def inline(text: str) -> str:
    """Inline Markdown to HTML: code spans verbatim (escaped), then links and emphasis."""
    out, pos = [], 0
    for match in _CODE_SPAN.finditer(text):
        out.append(_inline_text(text[pos : match.start()]))
        out.append(f"<code>{html.escape(match.group(2).strip())}</code>")
        pos = match.end()
    out.append(_inline_text(text[pos:]))
    return "".join(out)


def _inline_text(text: str) -> str:
    text = html.escape(text)  # [, ], (, ) and * survive escaping, so the patterns still apply
    text = _LINK.sub(_link, text)
    text = _STRONG.sub(r"<strong>\1</strong>", text)
    return _EM.sub(r"<em>\1</em>", text)


def _link(match: re.Match) -> str:
    label, url = match.group(1), match.group(2)
    if not _SAFE_URL.match(html.unescape(url)):  # javascript:, data: ... stay text
        return match.group(0)
    return f'<a href="{url}">{label}</a>'


def _plain(text: str) -> str:
    """A heading's text without Markdown marks (for its slug and the contents)."""
    return re.sub(r"[`*]", "", _LINK.sub(r"\1", text))


class _Renderer:
    def __init__(self, code_actions: Callable[[CodeBlock], str] | None) -> None:
        self.code_actions = code_actions
        self.headings: list[Heading] = []
        self.blocks: list[CodeBlock] = []
        self.section = ""
        self._slugs: dict[str, int] = {}

    def blocks_html(self, lines: list[str], offset: int = 0) -> str:
        """Block-level Markdown of `lines` (line `offset` of the document first)."""
        out: list[str] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if not line.strip():
                i += 1
            elif fence := _FENCE.match(line):
                i = self._code(lines, i, fence.group(1), offset, out)
            elif heading := _HEADING.match(line):
                out.append(self._heading(len(heading.group(1)), heading.group(2)))
                i += 1
            elif _ITEM.match(line):
                i = self._list(lines, i, offset, out)
            elif (
                line.lstrip().startswith("|")
                and i + 1 < len(lines)
                and _TABLE_RULE.match(lines[i + 1].strip())
            ):
                i = self._table(lines, i, out)
            else:
                i = self._paragraph(lines, i, out)
        return "\n".join(out)

    def _code(self, lines: list[str], i: int, language: str, offset: int, out: list[str]) -> int:
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        block = CodeBlock(
            index=len(self.blocks),
            language=language,
            text="".join(f"{line}\n" for line in lines[i + 1 : end]),
            line=offset + i + 1,
            section=self.section,
        )
        self.blocks.append(block)
        lang = f' data-lang="{html.escape(language)}"' if language else ""
        actions = self.code_actions(block) if self.code_actions else ""
        out.append(  # tabindex: a block wider than the screen scrolls by keyboard too (axe)
            f'<div class="md-code" id="example-{block.index}"{lang}>'
            f'<pre tabindex="0"><code>{html.escape(block.text)}</code></pre>{actions}</div>'
        )
        return end + 1

    def _heading(self, level: int, text: str) -> str:
        plain = _plain(text)
        slug = slugify(plain)
        seen = self._slugs.get(slug, 0)
        self._slugs[slug] = seen + 1
        slug = f"{slug}-{seen}" if seen else slug
        self.headings.append(Heading(level=level, text=plain, slug=slug))
        self.section = slug
        return (
            f'<h{level} id="{html.escape(slug)}">{inline(text)}'
            f'<a class="md-anchor" href="#{html.escape(slug)}" aria-label="Link to this section">'
            f"#</a></h{level}>"
        )

    def _paragraph(self, lines: list[str], i: int, out: list[str]) -> int:
        start = i
        while (
            i < len(lines)
            and lines[i].strip()
            and not (_FENCE.match(lines[i]) or _HEADING.match(lines[i]) or _ITEM.match(lines[i]))
            and not (i > start and lines[i].lstrip().startswith("|"))
        ):
            i += 1
        i = max(i, start + 1)
        out.append(f"<p>{inline(chr(10).join(line.strip() for line in lines[start:i]))}</p>")
        return i

    def _list(self, lines: list[str], i: int, offset: int, out: list[str]) -> int:
        first = _ITEM.match(lines[i])
        indent, ordered = len(first.group(1)), first.group(2)[0].isdigit()
        items: list[str] = []
        while i < len(lines):
            item = _ITEM.match(lines[i])
            if not item or len(item.group(1)) != indent or item.group(2)[0].isdigit() != ordered:
                break
            content = len(item.group(1)) + len(item.group(2)) + 1
            body, start = [item.group(3)], i
            i += 1
            while i < len(lines):  # continuation: indented past the marker, or a blank line
                line = lines[i]
                deeper = len(line) - len(line.lstrip()) > indent
                if line.strip() and deeper:
                    body.append(line[content:] if line[:content].isspace() else line.lstrip())
                elif (
                    not line.strip()
                    and i + 1 < len(lines)
                    and lines[i + 1].startswith(" " * (indent + 1))
                ):
                    body.append("")
                else:
                    break
                i += 1
            inner = self.blocks_html(body, offset + start)
            if inner.startswith("<p>") and inner.count("<p>") == 1 and inner.endswith("</p>"):
                inner = inner[3:-4]  # a tight item: no paragraph around its text
            elif inner.startswith("<p>") and "</p>\n" in inner:
                head, rest = inner.split("</p>\n", 1)
                inner = f"{head[3:]}\n{rest}" if "<p>" not in rest else inner
            items.append(f"<li>{inner}</li>")
            while i < len(lines) and not lines[i].strip():  # a blank line between items
                nxt = _ITEM.match(lines[i + 1]) if i + 1 < len(lines) else None
                if (
                    nxt is None
                    or len(nxt.group(1)) != indent
                    or nxt.group(2)[0].isdigit() != ordered
                ):
                    break
                i += 1
        tag = "ol" if ordered else "ul"
        out.append(f"<{tag}>{''.join(items)}</{tag}>")
        return i

    def _table(self, lines: list[str], i: int, out: list[str]) -> int:
        head = _cells(lines[i])
        rows = []
        i += 2
        while i < len(lines) and lines[i].lstrip().startswith("|"):
            rows.append(_cells(lines[i]))
            i += 1
        th = "".join(f"<th>{inline(c)}</th>" for c in head)
        body = "".join(
            "<tr>" + "".join(f"<td>{inline(c)}</td>" for c in row) + "</tr>" for row in rows
        )
        out.append(
            f'<div class="table-wrap md-table"><table><thead><tr>{th}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>"
        )
        return i


def _cells(line: str) -> list[str]:
    """A table row's cells: split on bars that are not escaped (`\\|` is a literal bar)."""
    row = line.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", row)]


def markdown_render(text: str, *, code_actions: Callable[[CodeBlock], str] | None = None):
    """`text` as HTML, with its headings and fenced code blocks; `code_actions(block)` returns
    trusted HTML placed inside each code block's container (the reference's Try links)."""
    renderer = _Renderer(code_actions)
    body = renderer.blocks_html(text.splitlines())
    return Rendered(html=body, headings=renderer.headings, blocks=renderer.blocks)
