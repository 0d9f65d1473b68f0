"""Test cases' expectations in the UI: edit one as YAML, review what the saved draft changes in
the failing ones (old and new, entry by entry), and accept the new results.

The list fragment (#tests-list, policies/_tests.html) holds an expectation editor per case and
a #tests-review region; these views answer with that fragment (or the review) for htmx, and
with the Test cases page otherwise. Review and accept work on the saved draft: accepting needs
the revision that was reviewed (a draft saved since is refused, as publish refuses it).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from policies import services
from policies.engine.document import PolicyInvalid, parse_text
from policies.errors import EvaluationTooSlow, PreconditionFailed, ServiceError
from policies.evaluation import policy_compile, request_guard, test_cases_run
from policies.models import Policy, PolicyTestCase
from policies.numbers import number_or_none

from .access import is_htmx, page_access
from .policy_views import _abilities, _policy, _toast
from .test_views import _tests_context, text_rows

MAX_EXPECT_CHARS = 64 * 1024  # a recorded expectation of 5000 nodes' verdicts is about 100 KB
# in JSON but far less as flow YAML; hand-written ones are a few lines


def _list_answer(
    request: HttpRequest,
    policy: Policy,
    *,
    status: int = 200,
    focus: str = "",
    edit: dict[str, Any] | None = None,
    review: dict[str, Any] | None = None,
) -> HttpResponse:
    """The test cases against the saved draft: the fragment for htmx, else the page."""
    context = _tests_context(request, policy, policy.draft, "the saved draft")
    context.update(edit=edit or {}, focus=focus, review=review)
    template = "policies/_tests.html" if is_htmx(request) else "policies/tests.html"
    return render(request, template, context, status=status)


def _expect_parse(text: str) -> tuple[Any, list[dict[str, str]]]:
    """The YAML text of an expectation -> (value, errors), read as bounded as a document."""
    if len(text) > MAX_EXPECT_CHARS:
        return None, [{"path": "expect", "message": f"at most {MAX_EXPECT_CHARS} characters"}]
    if not text.strip():
        return {}, []
    try:
        return parse_text(text).data, []
    except PolicyInvalid as exc:
        return None, [
            {
                "path": "expect",
                "message": (f"line {e.doc_line}: " if e.doc_line else "") + e.message,
            }
            for e in exc.errors
        ]


@page_access(roles={"POST": "editor"})
def test_expect_save(request: HttpRequest, name: str) -> HttpResponse:
    """Saves a test case's expectation, written or edited by hand as YAML."""
    policy = _policy(name)
    case = get_object_or_404(PolicyTestCase, policy=policy, name=request.POST.get("case", ""))
    text = request.POST.get("expect", "")
    expect, errors = _expect_parse(text)
    if not errors:
        try:
            services.test_case_update(
                actor=request.user, case=case, pod=case.pod, cluster=case.cluster, expect=expect
            )
        except ServiceError as exc:
            details = exc.details if isinstance(exc.details, list) else []
            errors = [d for d in details if isinstance(d, dict)] or [
                {"path": "expect", "message": exc.message}
            ]
    if errors:
        edit = {"case": case.name, "text": text, "errors": errors, "rows": text_rows(text)}
        return _list_answer(request, policy, status=422, edit=edit)
    if not is_htmx(request):
        messages.success(request, f"Saved the expectation of {case.name}.")
        return redirect("policy-tests", name=policy.name)
    response = _list_answer(request, policy, focus=case.name, edit={"case": case.name})
    return _toast(response, f"Saved the expectation of {case.name}.")


def _value_text(value: Any) -> str:
    """An expectation entry as the YAML shows it: lists joined, booleans lower case."""
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _review(policy: Policy) -> dict[str, Any]:
    """Each failing stored case of the saved draft, with the expectation accepting would write
    and what that changes; or the reason the cases cannot run."""
    try:
        with request_guard():
            compiled = policy_compile(policy.draft)
            results = test_cases_run(compiled=compiled, stored=policy.test_cases.all(), review=True)
    except PolicyInvalid as exc:
        return {"error": f"The saved draft has {len(exc.errors)} problem(s); fix it first."}
    except EvaluationTooSlow as exc:
        return {"error": f"The test cases could not run: {exc}"}
    stored = set(policy.test_cases.values_list("name", flat=True))
    failing = [r for r in results if r["name"] in stored and not r["passed"]]
    for result in failing:
        for change in result.get("changes", ()):
            change["old_text"] = _value_text(change["old"])
            change["new_text"] = _value_text(change["new"])
            change["path_parts"] = change["path"].split(".")  # a phone breaks it at the dots
    return {
        "revision": policy.draft_revision,
        "cases": failing,
        "acceptable": sum(1 for r in failing if "proposed" in r),
    }


def _review_answer(
    request: HttpRequest, policy: Policy, review: dict[str, Any], *, status: int = 200
) -> HttpResponse:
    if not is_htmx(request):
        return _list_answer(request, policy, status=status, review=review)
    context = {"policy": policy, "review": review, **_abilities(request)}
    response = render(request, "policies/_tests_review.html", context, status=status)
    response["HX-Retarget"] = "#tests-review"
    response["HX-Reswap"] = "innerHTML"
    return response


@page_access(roles={"POST": "viewer"})
def tests_review(request: HttpRequest, name: str) -> HttpResponse:
    """What the saved draft changes in each failing test case: old and new per entry. Viewers
    see it too (it is a read); only editors get the Accept button."""
    policy = _policy(name)
    return _review_answer(request, policy, _review(policy))


@page_access(roles={"POST": "editor"})
def tests_accept(request: HttpRequest, name: str) -> HttpResponse:
    """Accepts the reviewed results of the ticked cases (services.test_cases_accept)."""
    policy = _policy(name)
    revision = number_or_none(request.POST.get("revision"), minimum=0)
    names = request.POST.getlist("cases")
    problem = ""
    if revision is None:
        problem = "The review is missing its draft revision; review the changes again."
    elif not names:
        problem = "Tick at least one test case to accept its new results."
    else:
        try:
            with request_guard():  # the cases run under the draft's row lock: never for long
                accepted = services.test_cases_accept(
                    actor=request.user, policy=policy, revision=revision, names=names
                )
        except PreconditionFailed as exc:
            problem = f"{str(exc.message)[:1].upper()}{str(exc.message)[1:]}."
        except ServiceError as exc:
            details = exc.details if isinstance(exc.details, list) else []
            more = "; ".join(d.get("message", "") for d in details if isinstance(d, dict))
            problem = exc.message + (f": {more}" if more else "")
        except PolicyInvalid as exc:
            problem = f"The saved draft has {len(exc.errors)} problem(s); fix it first."
        except EvaluationTooSlow as exc:
            problem = f"The test cases could not run: {exc}"
    if problem:
        review = {**_review(Policy.objects.get(pk=policy.pk)), "problem": problem}
        return _review_answer(request, policy, review, status=422)
    count = len(accepted)
    said = (
        f"Accepted the new results of {count} test case{'s' if count != 1 else ''}."
        if count
        else "Nothing to accept: the ticked test cases pass."
    )
    if not is_htmx(request):
        messages.success(request, said)
        return redirect("policy-tests", name=policy.name)
    return _toast(_list_answer(request, policy, focus="summary"), said)
