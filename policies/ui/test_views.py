"""Test cases in the UI: the Test cases page and tab (each case with its result against the
saved draft or the editor's text), "Add as test case" from the playground's preview, and delete.

Editing an expectation, reviewing and accepting new results are in test_expect_views.py.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from policies import selectors, services
from policies.cluster.manifest import parse_manifest
from policies.cluster.sources import CLUSTER_KEYS, cluster_for
from policies.engine.document import PolicyInvalid
from policies.engine.testcases import PINS, expect_canonical
from policies.errors import (
    ClusterUnavailable,
    EvaluationTooSlow,
    InputError,
    ServiceError,
)
from policies.evaluation import (
    policy_compile,
    policy_test_case_count,
    preview_run,
    profile_active,
    request_guard,
)
from policies.models import Policy, PolicyTestCase
from policies.schedmodel.profile import FILTERS

from .access import is_htmx, page_access
from .policy_views import _abilities, _policy, _preview_choice, _run_tests, _toast
from .preview import pod_manifest, pod_resolve, test_expectation

_TEST_NAME_JUNK = re.compile(r"[^a-z0-9-]+")


# --- test cases -----------------------------------------------------------------------------------


def _test_rows(policy: Policy, results: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    by_name = {r["name"]: r for r in results or []}
    rows = []
    for case in policy.test_cases.select_related("created_by"):
        try:
            meta = parse_manifest(case.pod).get("metadata") or {}
            pod = f"{meta.get('namespace', 'default')}/{meta.get('name', '?')}"
        except InputError:
            pod = "(unreadable pod)"
        expect = case.expect or {}
        rows.append(
            {
                "case": case,
                "pod": pod,
                "cluster": case.cluster if case.cluster in ("", "demo") else "inline",
                "expects": expect_summary(expect),
                "expect_yaml": yaml.safe_dump(
                    expect_canonical(expect), sort_keys=False, default_flow_style=None, width=80
                ),
                "result": by_name.get(case.name),
            }
        )
        rows[-1]["expect_rows"] = text_rows(rows[-1]["expect_yaml"])
    # the document's own `tests:` run too (publish runs them); listed after the stored ones
    stored = {r["case"].name for r in rows}
    extra = [r for r in results or [] if r["name"] not in stored]
    return rows + [{"case": None, "name": r["name"], "result": r} for r in extra]


def text_rows(text: str) -> int:
    """A textarea's height for `text`: its lines and one more, 4 to 20."""
    return max(4, min(20, text.count("\n") + 2))


def expect_summary(expect: dict[str, Any]) -> str:
    """A test case's expectation in a few words, for the list (the YAML is one click away):
    where the pod lands first, then what the policy alone must do (marked policy-level)."""
    parts = []
    if "landsIn" in expect:
        lands = expect["landsIn"]
        parts.append(f"lands on {lands[0]}" if len(lands) == 1 else f"lands in one of {len(lands)}")
    if "unschedulable" in expect:
        value = expect["unschedulable"]
        if value is False:
            parts.append("gets a node")
        elif isinstance(value, list):
            parts.append(f"unschedulable ({len(value)} reason{'s' if len(value) != 1 else ''})")
        else:
            parts.append("unschedulable")
    if expect.get("applies") is False:
        parts.append("passes through the policy")
    rejected = expect.get("rejectedBy") or {}
    if rejected:
        by_plugin = sum(1 for v in rejected.values() if v in FILTERS)
        kinds = [
            f"{len(rejected) - by_plugin} by a rule" if len(rejected) > by_plugin else "",
            f"{by_plugin} by a plugin" if by_plugin else "",
        ]
        plural = "s" if len(rejected) != 1 else ""
        parts.append(f"{len(rejected)} rejection{plural} ({', '.join(k for k in kinds if k)})")
    policy_level = []
    if "winner" in expect:
        policy_level.append(f"winner {expect['winner']}")
    if "winnerIn" in expect:
        policy_level.append(f"winner among {len(expect['winnerIn'])}")
    for key, one, many in (
        ("verdicts", "verdict", "verdicts"),
        ("extenderScores", "exact score", "exact scores"),
        ("scores", "score bound", "score bounds"),
    ):
        count = len(expect.get(key) or {})
        if count:
            policy_level.append(f"{count} {one if count == 1 else many}")
    if policy_level:
        parts.append("policy-level: " + ", ".join(policy_level))
    return " · ".join(parts) or "the policy applies"


def _tests_context(
    request: HttpRequest, policy: Policy, document: str, against: str
) -> dict[str, Any]:
    results, error = _run_tests(policy, document)
    rows = _test_rows(policy, results)
    return {
        "policy": policy,
        "test_rows": rows,
        # the stored cases and the document's own, as the badges say (publish runs both)
        "tests_count": policy_test_case_count(
            stored_names=(r["case"].name for r in rows if r["case"] is not None),
            document=document,
        ),
        "tests_error": error,
        "tests_against": against,
        "tests_passed": sum(1 for r in results or [] if r["passed"]),
        "tests_total": len(results or []),
        "failing_cases": sum(
            1 for r in rows if r["case"] is not None and r["result"] and not r["result"]["passed"]
        ),
        **_abilities(request),
    }


@page_access(roles={"GET": "viewer"})
def tests_page(request: HttpRequest, name: str) -> HttpResponse:
    """Test cases with their result against the saved draft."""
    policy = _policy(name)
    context = _tests_context(request, policy, policy.draft, "the saved draft")
    context["active"] = selectors.policy_get_active(policy=policy)
    return render(request, "policies/tests.html", context)


@page_access(roles={"POST": "viewer"})
def tests_run(request: HttpRequest, name: str) -> HttpResponse:
    """Runs the test cases against the editor's text (fragment)."""
    policy = _policy(name)
    document = request.POST.get("document") or policy.draft
    against = "the editor's text" if request.POST.get("document") else "the saved draft"
    return render(
        request, "policies/_tests.html", _tests_context(request, policy, document, against)
    )


def _test_name(*, wanted: str, pod_name: str, pick: list[str], taken: set[str]) -> str:
    """The given name, or `<pod>-on-<pick>` (`<pod>-unschedulable`; `<pod>` for a tie) made
    unique (-2, -3, ...)."""
    if wanted:
        return wanted
    if len(pick) == 1:
        base = f"{pod_name}-on-{pick[0]}"
    else:
        base = pod_name if pick else f"{pod_name}-unschedulable"
    base = _TEST_NAME_JUNK.sub("-", base).strip("-")[:56]
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    return name


def _pins(request: HttpRequest) -> tuple[str, ...] | None:
    """The pins ticked in the playground (None: the form offered none, use the defaults);
    unknown values are dropped."""
    if not request.POST.get("pins_shown"):
        return None
    return tuple(p for p in PINS if p in request.POST.getlist("pin"))


@page_access(roles={"POST": "editor"})
def test_add(request: HttpRequest, name: str) -> HttpResponse:
    """ "Add as test case": the previewed pod, with what the author chose to pin about it (by
    default kube-scheduler's pick and the nodes the policy rejects; never every node's
    verdict) as the expectation, judged as the preview judged it (same profile)."""
    policy = _policy(name)
    cluster_key = request.POST.get("cluster", "")
    wanted = request.POST.get("test_name", "").strip()
    if len(wanted) > 63:
        return _add_answer(request, policy, error="A test case name has at most 63 characters.")
    pins = _pins(request)
    if pins == ():
        return _add_answer(request, policy, error="Tick at least one thing for the case to pin.")
    try:
        document = request.POST.get("document", "")
        policy_compile(document)
        choice = _preview_choice(request)
        cluster = cluster_for(key=cluster_key if cluster_key in CLUSTER_KEYS else "")
        pod = pod_resolve(choice=choice, cluster=cluster)
        manifest = pod_manifest(choice=choice, pod=pod)
    except PolicyInvalid as exc:
        return _add_answer(
            request, policy, error=f"Fix the document first ({len(exc.errors)} problem(s))."
        )
    except (InputError, ClusterUnavailable) as exc:
        return _add_answer(request, policy, error=str(exc))
    try:
        with request_guard():
            previewed = preview_run(
                document=document,
                pod=pod,
                cluster=cluster,
                profile=profile_active(scheduler_name=pod["schedulerName"]),
            )
    except EvaluationTooSlow as exc:
        return _add_answer(request, policy, error=str(exc))
    expect = test_expectation(preview=previewed, pins=pins)
    pick = list(previewed.placement.pick)
    case_name = _test_name(
        wanted=wanted,
        pod_name=pod["name"],
        pick=pick,
        taken=set(policy.test_cases.values_list("name", flat=True)),
    )
    try:
        case = services.test_case_create(
            actor=request.user,
            policy=policy,
            name=case_name,
            pod=manifest,
            # the demo cluster never changes; a live snapshot does, so such a test may drift
            cluster="demo" if cluster.source == "demo" else "",
            expect=expect,
        )
    except ServiceError as exc:
        details = exc.details if isinstance(exc.details, list) else []
        more = "; ".join(d.get("message", "") for d in details if isinstance(d, dict))
        return _add_answer(request, policy, error=exc.message + (f": {more}" if more else ""))
    return _add_answer(request, policy, case=case, expect=expect)


def _add_answer(
    request: HttpRequest,
    policy: Policy,
    *,
    error: str = "",
    case: PolicyTestCase | None = None,
    expect: dict[str, Any] | None = None,
) -> HttpResponse:
    context = {
        "policy": policy,
        "error": error,
        "case": case,
        "expect": expect or {},
        "summary": expect_summary(expect or {}),
    }
    if case is not None:
        context.update(_tests_context(request, policy, policy.draft, "the saved draft"))
    response = render(request, "policies/_test_added.html", context, status=422 if error else 200)
    if case is not None:
        _toast(response, f"Added test case {case.name}.")
    return response


@page_access(roles={"POST": "editor"})
def test_delete(request: HttpRequest, name: str) -> HttpResponse:
    """Deletes a test case (named in the form, so any name works)."""
    policy = _policy(name)
    case = get_object_or_404(PolicyTestCase, policy=policy, name=request.POST.get("case", ""))
    services.test_case_delete(actor=request.user, case=case)
    if not is_htmx(request):
        messages.success(request, f"Deleted test case {case.name}.")
        return redirect("policy-tests", name=policy.name)
    context = _tests_context(request, policy, policy.draft, "the saved draft")
    response = render(request, "policies/_tests.html", {**context, "oob_count": True})
    return _toast(response, f"Deleted test case {case.name}.")
