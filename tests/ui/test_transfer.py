"""A policy as one YAML file in the browser: download (with the recorded test cases) and import."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from policies import services
from policies.evaluation import policy_compile, test_cases_run
from policies.models import AuditEvent, Policy
from tests.conftest import client_for, make_user

pytestmark = pytest.mark.django_db
EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"
POD = "metadata: {name: abc, namespace: default}\nspec: {schedulerName: schedweb}\n"


@pytest.fixture(autouse=True)
def demo(settings):
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"


def test_a_downloaded_policy_imported_elsewhere_keeps_and_passes_its_tests():
    editor = make_user("ed", "editor")
    policy = services.policy_create(
        actor=editor, document=(EXAMPLES / "seed-003-name-length.yaml").read_text()
    )
    services.test_case_create(
        actor=editor,
        policy=policy,
        name="abc-on-cp-1",
        pod=POD,
        cluster="demo",
        expect={"winner": "cp-1"},
    )
    download = client_for("viewer").get("/policies/seed-003-name-length/download")
    assert download.status_code == 200
    assert download["Content-Disposition"] == 'attachment; filename="seed-003-name-length.yaml"'
    text = download.content.decode()
    assert "abc-on-cp-1" in text

    policy.delete()  # elsewhere: no such policy, no recorded cases
    client = client_for("editor", "importer")
    answer = client.post(
        "/policies/import", {"file": SimpleUploadedFile("p.yaml", text.encode())}, follow=True
    )
    assert b"Created seed-003-name-length from the file (1 test case in it)" in answer.content
    imported = Policy.objects.get(name="seed-003-name-length")
    results = test_cases_run(compiled=policy_compile(imported.draft), stored=[])
    assert [(r["name"], r["passed"]) for r in results] == [("abc-on-cp-1", True)]
    assert AuditEvent.objects.filter(action="policy.import").exists()


def test_importing_an_existing_name_replaces_its_draft_from_pasted_text():
    editor = make_user("ed", "editor")
    document = (EXAMPLES / "bin-packing.yaml").read_text()
    services.policy_create(actor=editor, document=document)
    changed = document.replace("weight: 2", "weight: 3")
    answer = client_for("editor").post("/policies/import", {"text": changed}, follow=True)
    assert b"Replaced the draft of bin-packing" in answer.content
    assert Policy.objects.get(name="bin-packing").draft == changed


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"text": "name: [\n"}, b"the file has 1 problem(s)"),
        ({"text": "   "}, b"choose a policy file or paste its text"),
        ({"file": SimpleUploadedFile("p.yaml", b"\xff\xfe")}, b"not UTF-8"),
        ({"file": SimpleUploadedFile("p.yaml", b"x" * 300_000)}, b"larger than"),
    ],
)
def test_a_bad_file_is_refused_in_words_and_nothing_is_stored(data, message):
    answer = client_for("editor").post("/policies/import", data)
    assert answer.status_code == 422 and message in answer.content
    assert not Policy.objects.exists()


def test_viewers_cannot_import_and_a_missing_policy_has_no_download():
    viewer = client_for("viewer")
    assert viewer.post("/policies/import", {"text": "x"}).status_code == 403
    assert viewer.get("/policies/nope/download").status_code == 404
