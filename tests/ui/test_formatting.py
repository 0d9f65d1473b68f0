"""One way to write numbers, quantities and text (policies/formatting.py), so "4 CPU" reads the same on
the playground, the cluster page, the decisions page and in the terminal."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.cluster.manifest import pod_view_from_text
from policies.formatting import (
    bytes_format,
    cpu_format,
    number_format,
    printable,
    quantity_format,
)
from policies.textformat import _num as terminal_number
from policies.ui.cluster_page import pod_row
from policies.ui.preview import pod_summary

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"


@pytest.mark.parametrize(
    ("value", "places", "expected"),
    [
        (12, 2, "12"),
        (12.0, 2, "12"),  # a whole float reads like an int
        (12.5, 2, "12.5"),  # no trailing zero
        (12.3456, 2, "12.35"),
        (12.3456, 1, "12.3"),
        (0.0, 2, "0"),
        (-0.001, 2, "0"),  # rounds to zero: no "-0"
        (-3.25, 1, "-3.2"),  # Python rounds the binary value of 3.25 half to even
        (100, 1, "100"),
        (None, 2, "—"),
        (True, 2, "—"),  # a boolean is not a number here
        ("low", 2, "low"),  # a CEL string score, as recorded
        (float("inf"), 2, "inf"),
    ],
)
def test_numbers_have_at_most_their_places_and_no_trailing_zeros(value, places, expected):
    assert number_format(value, places=places) == expected


def test_the_terminal_writes_a_missing_number_as_a_hyphen():
    assert terminal_number(None) == "-"
    assert terminal_number(68.333333) == "68.33"


@pytest.mark.parametrize(
    ("millis", "expected"),
    [
        (0, "0 CPU"),
        (250, "250m CPU"),
        (999, "999m CPU"),
        (1000, "1 CPU"),
        (4000, "4 CPU"),
        (3500, "3.5 CPU"),
        (3333, "3.333 CPU"),  # exact: millicores have three decimals at most
        (64000, "64 CPU"),
    ],
)
def test_cpu_is_written_in_cpus_or_millicores_exactly(millis, expected):
    assert cpu_format(millis) == expected


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),  # 1536 / 1024 = 1.5
        (134217728, "128 MiB"),  # 128 x 2^20
        (1610612736, "1.5 GiB"),  # 1.5 x 2^30
        (99 * 2**30 + 2**29, "99.5 GiB"),
        (250 * 2**30 + 2**29, "250 GiB"),  # 250.5 at 100 or more: no decimal (half to even)
        (2**50, "1 PiB"),
    ],
)
def test_bytes_are_written_in_binary_units(n, expected):
    assert bytes_format(n) == expected


@pytest.mark.parametrize(
    ("resource", "value", "expected"),
    [
        ("cpu", 4000, "4 CPU"),
        ("memory", 2 * 2**30, "2 GiB memory"),
        ("ephemeral_storage", 2**30, "1 GiB ephemeral-storage"),
        ("hugepages_2Mi", 4 * 2**20, "4 MiB hugepages-2Mi"),
        ("nvidia_com_gpu", 2, "2 nvidia_com_gpu"),
    ],
)
def test_a_named_quantity_carries_its_resource(resource, value, expected):
    assert quantity_format(resource=resource, value=value) == expected


def test_the_playground_and_the_cluster_page_write_a_pods_cpu_and_memory_the_same_way():
    pod = pod_view_from_text((EXAMPLES / "pods" / "web.yaml").read_text())
    row = pod_row(pod)
    summary = pod_summary(pod=pod)["requests"]
    assert row["cpu_text"] in summary
    assert f"{row['memory_text']} memory" in summary


# --- text: control and bidi characters (issue 27) ------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [("ok", "ok"), ("\x00\x1b[2J", "\\x00\\x1b[2J"), ("\u202egnp.exe", "\\u202egnp.exe")],
)
def test_pages_and_the_terminal_write_text_with_control_and_bidi_characters_escaped(raw, shown):
    from django.template import Context, Template

    assert printable(raw) == shown
    assert Template("{% load text %}{{ v|printable }}").render(Context({"v": raw})) == shown


def test_an_alert_shows_an_error_quoting_a_pod_with_its_escapes_visible():
    from django.template.loader import render_to_string

    body = render_to_string(
        "components/alert.html", {"message": 'pod "a\x1b[2J\u202eb" is invalid'}
    )
    assert "\x1b" not in body and "\u202e" not in body
    assert "a\\x1b[2J\\u202eb" in body


@pytest.mark.django_db
def test_a_stored_decision_shows_its_filter_messages_and_errors_escaped(settings):
    from policies.models import Decision
    from tests.conftest import client_for
    from tests.ui.test_ops_pages import record_decision

    settings.SCHEDWEB_CLUSTER_SOURCE = "demo"  # the page models the cycle on it
    decision, _ = record_decision(verb="filter")
    # stored before the engine escaped its messages (BEL, not NUL: PostgreSQL's jsonb refuses
    # \u0000, so no decision there ever held one)
    raw = "\x1b[31mred\x07 \u202egnp.exe"
    decision.nodes = {
        "scores": [],
        "weights": [],
        "nodes": [
            {"n": "a", "ok": True, "errors": [{"rule": "e", "message": raw}]},
            {"n": "b", "ok": False, "rule": "r", "msg": raw},
        ],
    }
    Decision.objects.filter(pk=decision.pk).update(nodes=decision.nodes)
    body = client_for("viewer").get(f"/decisions/{decision.pk}/").content.decode()
    assert "\x1b" not in body and "\x07" not in body and "\u202e" not in body
    assert body.count("\\x1b[31mred\\x07 \\u202egnp.exe") >= 2
