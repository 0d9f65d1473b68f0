"""Issue 23 in the browser: one answer (kube-scheduler's pick) on the demo with seed 003, each
node's final total and its breakdown without sideways scrolling at 1440x900 and 390x844, the
node drill-down's fixes, and a test case recorded in the playground that pins the pick, passes
`policy test` after `policy export` and survives a node added to the cluster.

Screenshots: artifacts/screenshots/one-answer-<look>.png, one-answer-drill-<look>.png,
one-answer-compare-<look>.png.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

from policies import services
from policies.cluster.demo import demo_cluster_objects, demo_objects
from policies.models import Policy
from tests.browser.looks import fits
from tests.browser.test_playground import example, meaningful_errors, ready, sign_in
from tests.conftest import make_user

SEED = "seed-003-name-length"
PICK = "c-mem-1"  # kube-scheduler's pick for default/abc (cp-1 scores highest but is tainted)
# a label key of the longest shape Kubernetes allows past its prefix (63 characters)
LONG_KEY = (
    "topology.example.com/" + "rack-position-within-the-row-of-the-second-floor-of-building-b"
)


@pytest.fixture(autouse=True)
def demo(settings):
    """Every preview here runs on the bundled demo cluster."""
    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"


def _no_sideways_scroll(page, selector: str) -> None:
    """The element shows all its content across: scrollWidth <= clientWidth."""
    scroll, client = page.evaluate(
        "(s) => { const e = document.querySelector(s); return [e.scrollWidth, e.clientWidth]; }",
        selector,
    )
    assert scroll <= client, f"{selector}: {scroll} px of content in {client} px"


def test_the_answer_and_each_final_total_with_its_breakdown_fit_without_sideways_scrolling(
    live_server, look, page, screenshot
):
    services.policy_create(actor=make_user("una", "viewer"), document=example(SEED))
    sign_in(page, live_server, "una", then=f"/policies/{SEED}/?pod=default/abc")
    ready(page)

    # one answer: kube-scheduler's pick, starred in the table; no "policy's choice"
    assert page.inner_text("#summary-pick").strip() == PICK
    assert page.locator("#summary-winner").count() == 0
    assert "choice" not in page.inner_text("#preview-result").lower()
    assert page.locator("#nodes tr .pg-winner").count() == 1
    assert page.locator(f"#nodes tr.pg-row-pick[data-node='{PICK}']").count() == 1

    # the final total and its stacked bar (kube-scheduler's plugins vs the policy) are on
    # screen for the pick, and nothing scrolls sideways: the page nor the table
    fits(page)
    _no_sideways_scroll(page, ".pg-nodes-wrap")
    row = page.locator(f"#nodes tr[data-node='{PICK}']")
    final = row.locator(".pg-final")
    assert final.is_visible() and final.locator("strong").inner_text().strip().isdigit()
    segments = row.locator(".pg-stack .pg-seg")
    assert segments.count() == 2
    wrap = page.locator(".pg-nodes-wrap").bounding_box()
    for i in range(2):
        box = segments.nth(i).bounding_box()
        assert box["width"] > 0 and box["x"] + box["width"] <= wrap["x"] + wrap["width"] + 1
    page.evaluate("document.querySelector('.pg-results-pane').scrollTop = 0")
    screenshot(page, f"one-answer-{look.id}")

    # the policy's top node over every node (cp-1) is never sent to it: its drill-down says
    # so and shows the policy's arithmetic there, never a bare "—"
    page.click("#nodes .pg-drill-open[data-node='cp-1']")
    drill = page.locator("#node-drill")
    assert drill.is_visible()
    policy = page.evaluate(
        """() => [...document.querySelectorAll('#node-drill h5')]
            .find((h) => h.textContent === 'Policy').nextElementSibling.innerText"""
    )
    assert policy.startswith("Not sent to the policy: kube-scheduler's TaintToleration")
    assert "short-node-name: raw 16 → normalized 100" in drill.inner_text()
    _no_sideways_scroll(page, "#node-drill")
    page.click("#node-drill .pg-drill-close")

    # one long label key leaves its value column room (not one letter per line)
    page.click("#what-if-panel summary")
    page.fill("#what-if", f"- label: {{node: {PICK}, key: {LONG_KEY}, value: rack-42}}\n")
    page.wait_for_selector("#what-if-applied")
    page.click(f"#nodes .pg-drill-open[data-node='{PICK}']")
    widths = page.evaluate(
        """() => [...document.querySelectorAll('#node-drill .pg-kv')].map((dl) => ({
            dl: dl.getBoundingClientRect().width,
            dd: Math.min(...[...dl.querySelectorAll('dd')].map((d) => d.getBoundingClientRect().width)),
        }))"""
    )
    assert widths and all(w["dd"] >= 0.3 * w["dl"] for w in widths), widths
    lines = page.evaluate(
        """() => {
            const dd = [...document.querySelectorAll('#node-drill dd')]
                .find((d) => d.textContent === 'rack-42');
            const range = document.createRange();
            range.selectNodeContents(dd);
            return range.getClientRects().length;
        }"""
    )
    assert lines == 1  # the value on one line, not a letter per line
    _no_sideways_scroll(page, "#node-drill")
    fits(page)
    screenshot(page, f"one-answer-drill-{look.id}", selector="#node-drill")
    assert meaningful_errors(page) == []


def test_compare_with_published_says_where_the_pod_goes_side_by_side_and_fits(
    live_server, look, page, screenshot
):
    publisher = make_user("pia", "publisher")
    policy = services.policy_create(actor=publisher, document=example(SEED))
    services.policy_publish(
        actor=publisher, policy=policy, message="v1", revision=policy.draft_revision
    )
    policy.refresh_from_db()
    flipped = policy.draft.replace(
        "expression: 20 - size(node.name)", "expression: size(node.name)"
    )
    services.policy_update_draft(
        actor=publisher, policy=policy, document=flipped, if_match=policy.etag
    )
    sign_in(page, live_server, "pia", then=f"/policies/{SEED}/")
    page.goto(f"{live_server.url}/policies/{SEED}/?pod=default/abc&compare=1")
    ready(page)
    page.wait_for_selector("#compare-banner[data-moves='true']")
    after = page.inner_text("#summary-pick").strip()
    sides = page.locator("#compare-sides tbody tr").first.inner_text().split("\t")
    assert [cell.strip() for cell in sides] == ["kube-scheduler picks", PICK, after]
    assert after != PICK
    fits(page)
    _no_sideways_scroll(page, ".pg-nodes-wrap")
    page.locator("#compare-banner").scroll_into_view_if_needed()
    screenshot(page, f"one-answer-compare-{look.id}", selector="#compare-banner")
    assert meaningful_errors(page) == []


def test_a_test_case_recorded_from_seed_003_pins_the_pick_and_survives_export_and_a_new_node(
    live_server, page, tmp_path
):
    user = make_user("tess", "editor")
    services.policy_create(actor=user, document=example(SEED))
    sign_in(page, live_server, "tess", then=f"/policies/{SEED}/?pod=default/abc")
    ready(page)
    pick = page.inner_text("#summary-pick").strip()
    assert pick == PICK
    # what the case pins: the pick and the nodes the policy rejects (none here), ticked
    assert page.is_checked("#test-pins input[value=pick]")
    assert not page.is_checked("#test-pins input[value=pluginRejects]")
    page.click("#add-test-button")
    page.wait_for_selector("#added-test-name")
    assert page.inner_text("#added-test-name") == f"abc-on-{PICK}"
    assert page.inner_text("#added-test-summary") == f"lands on {PICK}"
    case = Policy.objects.get(name=SEED).test_cases.get()
    assert case.expect == {"landsIn": [PICK]}  # not cp-1, not 36 verdicts
    page.click("#tab-tests")
    row = page.locator(f"#tests-table tr[data-test='abc-on-{PICK}']")
    assert row.locator(".badge--pass").count() == 1

    # policy export -> policy test: it passes
    exported = tmp_path / "seed.yaml"
    call_command("policy", "export", SEED, "-o", str(exported))
    assert _policy_test(exported) == (0, "1 of 1 test cases passed")

    # the same case on the demo cluster plus one more node (a copy of a medium worker):
    # nothing it pins depends on that node, so it still passes
    nodes, pods = demo_objects()
    extra = json.loads(
        json.dumps(next(n for n in nodes if n["metadata"]["name"] == "worker-medium-a-1"))
    )
    extra["metadata"]["name"] = "worker-medium-a-4"
    extra["metadata"]["labels"]["kubernetes.io/hostname"] = "worker-medium-a-4"
    extra["metadata"].pop("uid", None)
    items = [*nodes, extra, *pods, *demo_cluster_objects()]
    (tmp_path / "bigger.json").write_text(json.dumps({"kind": "List", "items": items}))
    data = yaml.safe_load(exported.read_text())
    data["tests"][0]["cluster"] = "bigger.json"
    bigger = tmp_path / "bigger.yaml"
    bigger.write_text(yaml.safe_dump(data, sort_keys=False))
    assert _policy_test(bigger) == (0, "1 of 1 test cases passed")
    assert meaningful_errors(page) == []


def _policy_test(path: Path) -> tuple[int, str]:
    import io

    out = io.StringIO()
    try:
        call_command("policy", "test", str(path), stdout=out, stderr=io.StringIO())
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue().splitlines()[-1]
