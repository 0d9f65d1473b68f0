"""The language reference inside the product: docs/policies.md (its one source, read once per
process) rendered at /help/policies/, searchable in the page, each example runnable.

"Try in playground" opens a policy's playground (the one the reader came from, else the most
recently changed) with the example in its editor, unsaved, as a share link does: the draft stays
as it is until the user saves. What the editor gets, by kind of block:
- a policy (YAML with `name` and filters, scores, queue or gang): exactly that text;
- a Pod manifest (YAML with `kind: Pod`): the draft, with the pod pasted as the previewed pod;
- CEL lines: a small document whose variables are those lines verbatim (comments included; CEL
  has `//` comments), so each node's drill-down shows their values; a line the reference marks
  `// => invalid:` shows its error as a marker on that line, which is what it illustrates.
"""

from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.safestring import mark_safe

from policies.models import Policy
from policies.numbers import number_or_none
from policies.ui.access import page_access
from policies.ui.markdown import CodeBlock, Rendered, markdown_render

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "policies.md"
POLICY_KEYS = {"filters", "scores", "queue", "gang"}


@dataclass(frozen=True)
class Example:
    """A runnable block of the reference: what "Try in playground" loads."""

    block: CodeBlock
    kind: str  # policy | pod | cel

    @property
    def number(self) -> int:
        return self.block.index

    def document(self, *, name: str) -> str:
        """The editor's text for this example in policy `name`'s playground (not for pods)."""
        if self.kind == "policy":
            return self.block.text
        return cel_document(self.block.text, name=name, line=self.block.line)


def cel_document(text: str, *, name: str, line: int) -> str:
    """A document whose variables are the CEL lines of a reference block, verbatim."""
    header = (
        f"# CEL example from the language reference (docs/policies.md, line {line}).\n"
        "# Each line is a variable: a node's drill-down in the preview shows its value there.\n"
        f"name: {name}\n"
        "schedulerNames: [schedweb]\n"
        "variables:\n"
    )
    variables = [
        f"  - name: example{number}\n    expression: |-\n      {source}\n"
        for number, source in enumerate((s for s in text.splitlines() if s.strip()), 1)
    ]
    return header + "".join(variables) + 'filters:\n  - name: every-node\n    expression: "true"\n'


def _kind(block: CodeBlock) -> str | None:
    if block.language == "cel":
        return "cel"
    if block.language != "yaml":
        return None
    try:
        data = yaml.safe_load(block.text)
    except yaml.YAMLError:
        return None
    if isinstance(data, dict) and data.get("kind") == "Pod":
        return "pod"
    if isinstance(data, dict) and "name" in data and POLICY_KEYS & set(data):
        return "policy"
    return None


@functools.cache
def reference() -> tuple[Rendered, dict[int, Example]]:
    """The rendered reference (Try links hold {try} for the page to fill) and its examples."""
    examples: dict[int, Example] = {}

    def actions(block: CodeBlock) -> str:
        kind = _kind(block)
        if kind is None:
            return ""
        examples[block.index] = Example(block=block, kind=kind)
        what = {"policy": "this policy", "pod": "this pod", "cel": "these expressions"}[kind]
        return (
            f'<a class="btn btn--sm md-try" data-try="{block.index}" href="{{try{block.index}}}"'
            f' title="Open the playground with {what} in the editor, unsaved">'
            "Try in playground</a>"
        )

    rendered = markdown_render(REFERENCE.read_text(encoding="utf-8"), code_actions=actions)
    return rendered, examples


# What a type error names -> the reference's section about it (policies/engine/cel/plain.py and
# the checker word them): operators, a resource, a field of pod or node, a type's methods.
_OPERATOR = re.compile(r"^'[^']+' (cannot|does not)|^'in' |both sides must|cannot be indexed")
_METHODS_OF = {
    "string": "strings-and-regex-the-kubernetes-cel-libraries",
    "Quantity": "quantities",
    "list": "lists-and-math",
    "Cluster": "cluster-helpers",
}
_CALLED = re.compile(r"\b(\w+)\(\.{0,3}\)")  # size(...), math.greatest(), Cluster.countPods(...)


def section_for(message: str) -> str:
    """The slug of the reference's section that explains a type error, or ""."""
    if message.startswith("unknown resource"):
        return "resources"
    if field := re.match(r"undefined field '\w+' on (Pod|Node)\b", message):
        return field.group(1).lower()
    if _OPERATOR.search(message):
        return "4-semantics-worth-knowing"
    if method := re.match(r"unknown method '\w+' on (\w+)", message):
        return _METHODS_OF.get(method.group(1), "3-functions")
    if message.startswith("unknown function"):
        return "3-functions"
    called = _CALLED.search(message)
    return _function_sections().get(called.group(1), "") if called else ""


@functools.cache
def _function_sections() -> dict[str, str]:
    """Each function or method name -> the first section of "3. Functions" that lists it."""
    rendered, _ = reference()
    headings = iter(rendered.headings)
    slug, inside, fenced, index = "", False, False, {}
    for line in REFERENCE.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6}\s", line):
            slug = next(headings).slug
            inside = slug == "3-functions" or (inside and not line.startswith("## "))
        elif inside and line.startswith("|"):
            for name in re.findall(r"`[^`]*?\b(\w+)\(", line):
                index.setdefault(name, slug)
    return index


def example_get(number: int) -> Example:
    """Example `number` of the reference (its code block's index); Http404 if none."""
    example = reference()[1].get(number)
    if example is None:
        raise Http404(f"the language reference has no runnable example {number}")
    return example


def example_from(request: HttpRequest) -> Example | None:
    """The example named by the playground's ?example=N, None without one; Http404 if unknown."""
    value = request.GET.get("example", "")
    if not value:
        return None
    number = number_or_none(value)
    if number is None:
        raise Http404(f"example {value[:40]!r} is not a number")
    return example_get(number)


def _host(request: HttpRequest) -> Policy | None:
    """The policy whose playground a Try opens: ?policy= when it exists, else the latest."""
    named = Policy.objects.filter(name=request.GET.get("policy", "")[:200]).first()
    return named or Policy.objects.order_by("-updated_at", "-pk").first()


@page_access(roles={"GET": "viewer"})
def reference_page(request: HttpRequest) -> HttpResponse:
    """docs/policies.md in the app chrome, with a search box and Try links."""
    rendered, examples = reference()
    host = _host(request)
    body = rendered.html
    for number in examples:
        href = (
            reverse("policy-playground", args=[host.name]) + "?" + urlencode({"example": number})
            if host is not None
            else reverse("policy-list") + "#new-policy"
        )
        body = body.replace(f'href="{{try{number}}}"', f'href="{html.escape(href)}"', 1)
    context = {
        "body": mark_safe(body),  # markdown.py escapes every character of the doc
        "headings": [h for h in rendered.headings if h.level in (2, 3)],
        "host": host,
        "example_count": len(examples),
    }
    return render(request, "help/policies.html", context)
