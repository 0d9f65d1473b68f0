"""The editor's support (policies/ui/completions.py, the gallery's preview) judges a document
under this installation's CEL budget, as publish does: a document over the budget gets what an
invalid document gets."""

from __future__ import annotations

import pytest
from django.test import Client

from policies.evaluation import policy_validate
from policies.ui.completions import policy_completions

# The variable's static cost: 1 + 2 + 64 labels x 5 = 323 (tests/engine/test_cel_cost.py)
DOCUMENT = """\
name: budget
schedulerNames: [schedweb]
variables:
  - name: labelled
    expression: node.labels.exists(k, k.startsWith('a'))
scores:
  - name: s
    expression: "variables.labelled ? 100 : 0"
"""


def test_a_draft_within_the_budget_offers_its_variables():
    variables = policy_completions(document=DOCUMENT, nodes=[])["variables"]
    assert [v["name"] for v in variables] == ["labelled"]


def test_a_draft_over_the_installations_budget_offers_no_variables_like_an_invalid_one(settings):
    settings.SCHEDWEB_CEL_COST_LIMIT = 50  # below 323
    assert policy_validate(DOCUMENT), "publish would refuse this document"
    assert policy_completions(document=DOCUMENT, nodes=[])["variables"] == []
    assert policy_completions(document="not: [a policy", nodes=[])["variables"] == []


@pytest.mark.django_db
def test_the_gallery_preview_refuses_a_draft_over_the_installations_budget(settings):
    settings.DEBUG = True
    client = Client()
    assert client.post("/_dev/components/preview", {"document": DOCUMENT}).status_code == 200
    settings.SCHEDWEB_CEL_COST_LIMIT = 50
    response = client.post("/_dev/components/preview", {"document": DOCUMENT})
    assert response.status_code == 422
    assert "cost" in response.content.decode()
