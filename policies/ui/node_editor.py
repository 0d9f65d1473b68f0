"""The playground's node editor (issue 29): a form over one node of the previewed cluster whose
changes become what-if edits (policies/cluster/whatif_node.py). The page appends them to the
what-if text, which stays the one source of truth (saved with a share, undone one by one).

POST /policies/<name>/node-edit with the playground's cluster and what-if text and `node`:
`action=open` answers the form filled with the node as the preview sees it (the what-if edits
so far applied); `action=apply` checks the posted form and answers 422 with the form and an error
beside each wrong field, or 200 with the edits to append. A node, cluster or what-if text that
cannot be used answers 422 saying so (the page swaps 422 answers in). Nothing is stored.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from policies.cluster.sources import CLUSTER_KEYS, cluster_for
from policies.cluster.whatif import EFFECTS, MAX_EDITS, whatif_nodes, whatif_parse
from policies.cluster.whatif_node import (
    RESOURCES,
    NodeForm,
    edits_text,
    node_form_edits,
    node_form_errors,
    node_form_from,
)
from policies.errors import ClusterUnavailable, InputError
from policies.models import Policy
from policies.ui.access import page_access

MAX_FIELD = 400  # characters kept of one posted value: more than a qualified key (317) needs


@page_access(roles={"POST": "viewer"})
def node_edit(request: HttpRequest, name: str) -> HttpResponse:
    """The node editor's form, or the edits its changes make (a fragment)."""
    get_object_or_404(Policy, name=name)
    post = request.POST
    node = post.get("node", "")[:MAX_FIELD]
    what_if = post.get("what_if", "")
    cluster_key = post.get("cluster", "")
    try:
        cluster = cluster_for(key=cluster_key if cluster_key in CLUSTER_KEYS else "")
        edited = whatif_nodes(cluster=cluster, text=what_if)
    except (ClusterUnavailable, InputError) as exc:
        return _answer(request, node=node, problem=str(exc), status=422)
    view = edited.state.node(node)
    if view is None:
        return _answer(
            request,
            node=node,
            problem=f"No node named {node} in the previewed cluster.",
            status=422,
        )
    before = node_form_from(view["object"])
    if post.get("action") != "apply":
        return _answer(request, node=node, form=before)
    after = _posted(request, before)
    errors = node_form_errors(after, existing={n["name"] for n in edited.state.nodes()})
    edits = node_form_edits(before, after) if not errors else []
    if not errors and not edits:
        errors["form"] = "Nothing changed: edit a field, then apply."
    elif len(whatif_parse(what_if)) + len(edits) > MAX_EDITS:
        errors["form"] = f"The what-if text would hold more than {MAX_EDITS} edits."
    if errors:
        return _answer(request, node=node, form=after, errors=errors, status=422)
    return _answer(request, node=node, form=after, applied=edits_text(edits))


def _posted(request: HttpRequest, before: NodeForm) -> NodeForm:
    """The form's values as posted (rows in order; a resource the node has stays asked for)."""
    post = request.POST

    def values(key: str) -> list[str]:
        return [v.strip()[:MAX_FIELD] for v in post.getlist(key)]

    return NodeForm(
        name=before.name,
        labels=list(zip(values("label_key"), values("label_value"), strict=False)),
        taints=list(
            zip(
                values("taint_key"),
                values("taint_value"),
                values("taint_effect"),
                strict=False,
            )
        ),
        unschedulable=post.get("unschedulable") == "on",
        allocatable={
            r: post.get(r, "").strip()[:MAX_FIELD]
            for r in RESOURCES
            if post.get(r, "").strip() or r in before.allocatable
        },
        copy_name=post.get("copy_name", "").strip()[:MAX_FIELD],
    )


def _answer(
    request: HttpRequest,
    *,
    node: str,
    form: NodeForm | None = None,
    errors: dict[str, str] | None = None,
    status: int = 200,
    **context,
) -> HttpResponse:
    """The fragment; each row and field carries its own error (the field path says which)."""
    errors = errors or {}
    if form is not None:
        labels = [
            {"key": k, "value": v, "errors": _row_errors(errors, f"labels[{i}]")}
            for i, (k, v) in enumerate(form.labels)
        ]
        taints = [
            {
                "key": k,
                "value": v,
                "effect": e,
                "errors": _row_errors(errors, f"taints[{i}]", ("key", "value", "effect")),
            }
            for i, (k, v, e) in enumerate(form.taints)
        ]
        context.update(
            groups=[
                {"kind": "label", "title": "Label", "rows": labels, "error": errors.get("labels")},
                {"kind": "taint", "title": "Taint", "rows": taints, "error": errors.get("taints")},
            ],
            resources=[
                {"name": r, "value": form.allocatable.get(r, ""), "error": errors.get(r, "")}
                for r in RESOURCES
            ],
            unschedulable=form.unschedulable,
            copy_name=form.copy_name,
        )
    context.update(
        node=node,
        form=form,
        effects=EFFECTS,
        problem=context.get("problem") or errors.get("form", ""),
        copy_error=errors.get("copyName", ""),
        error_count=len(errors),
    )
    return render(request, "policies/_node_editor.html", context, status=status)


def _row_errors(
    errors: dict[str, str], row: str, fields: tuple[str, ...] = ("key", "value")
) -> dict[str, str]:
    return {f: errors[f"{row}.{f}"] for f in fields if f"{row}.{f}" in errors}
