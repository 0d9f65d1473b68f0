"""A policy as one YAML file in the browser: download it with its recorded test cases (the same
text `manage.py policy export` prints) and import such a file (as `policy import` does: a new
policy, or the draft of the one it names replaced, audited)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from policies import selectors, services
from policies.engine.document import MAX_DOCUMENT_BYTES, PolicyInvalid
from policies.engine.tests_section import TestsSectionError
from policies.evaluation import policy_compile
from policies.models import Policy
from policies.ui.access import page_access


@page_access(roles={"GET": "viewer"})
def policy_download(request: HttpRequest, name: str) -> HttpResponse:
    """The draft with the recorded test cases in its `tests:`, as `<name>.yaml`."""
    policy = get_object_or_404(Policy, name=name)
    try:
        text = selectors.policy_export_text(policy=policy, text=policy.draft)
    except TestsSectionError as exc:
        messages.error(request, f"Cannot add the test cases to the file: {exc}")
        return redirect("policy-tests", name=policy.name)
    response = HttpResponse(text, content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{policy.name}.yaml"'
    return response


@page_access(roles={"POST": "editor"})
def policy_upload(request: HttpRequest) -> HttpResponse:
    """A policy file (upload or pasted text) -> a new policy or its draft replaced."""
    upload = request.FILES.get("file")
    text = request.POST.get("text", "")
    error = ""
    if upload is not None:
        if upload.size > MAX_DOCUMENT_BYTES:
            error = f"the file is larger than {MAX_DOCUMENT_BYTES // 1024} KiB"
        else:
            try:
                text = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                error = "the file is not UTF-8 text"
    if not error and not text.strip():
        error = "choose a policy file or paste its text"
    problems = []
    if not error:
        try:
            policy_compile(text)
            policy, created = services.policy_import(actor=request.user, document=text)
        except PolicyInvalid as exc:
            error, problems = f"the file has {len(exc.errors)} problem(s)", exc.errors
        else:
            tests = len(policy_compile(policy.draft).spec.tests)
            messages.success(
                request,
                f"{'Created' if created else 'Replaced the draft of'} {policy.name} from the file"
                f" ({tests} test case{'s' if tests != 1 else ''} in it).",
            )
            return redirect("policy-playground", name=policy.name)
    context = {"import_error": error, "import_problems": problems, "import_text": text[:20000]}
    return render(request, "policies/import.html", context, status=422)
