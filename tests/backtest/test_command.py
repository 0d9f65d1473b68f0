"""`manage.py policy backtest`: one line per pod that would differ; exit 1 only when asked."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import CommandError, call_command

from policies import services
from policies.backtest import run
from tests.backtest.conftest import BIN_PACKING, pending_schedweb, with_filter


def backtest(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("policy", "backtest", *args, stdout=out)
    except SystemExit as exc:
        return int(exc.code), out.getvalue()
    return 0, out.getvalue()


def set_draft(policy, document: str) -> None:
    services.policy_update_draft(
        actor=policy.owner, policy=policy, document=document, if_match=policy.etag
    )


def test_the_draft_prints_one_line_per_pod_that_would_differ(recorded, published):
    set_draft(published, with_filter(BIN_PACKING, "false"))
    code, out = backtest("bin-packing")
    lines = out.splitlines()
    assert code == 0  # differences alone do not fail the command
    assert lines[0].startswith(f"bin-packing the draft: {len(recorded)} recorded pods, ")
    assert f"{len(recorded)} would differ" in lines[0]
    unschedulable = [line for line in lines[1:] if line.startswith(run.UNSCHEDULABLE + "\t")]
    assert len(unschedulable) == len(recorded) == len(lines) - 1
    for node in recorded.values():
        assert any(line.endswith(f"\t{node} -> unschedulable") for line in unschedulable)


def test_fail_on_change_exits_1_when_a_pod_would_differ_and_0_when_none_does(recorded, published):
    # v1 itself: the recorded pods stay, but the pending pods that fit would schedule
    code, out = backtest("bin-packing", "--version", "1", "--fail-on-change")
    assert code == 1 and run.SCHEDULES in out
    set_draft(published, with_filter(BIN_PACKING, "false"))
    code, _ = backtest("bin-packing", "--last", "1", "--fail-on-change")
    assert code == 1
    # a schedulerName nobody decides for and with no pending pod: nothing differs
    other = BIN_PACKING.replace("[schedweb]", "[nobody]")
    set_draft(published, other)
    code, out = backtest("bin-packing", "--fail-on-change")
    assert code == 0 and "no decisions are recorded for schedulerNames nobody" in out


def test_json_prints_the_whole_result(recorded, published):
    code, out = backtest("bin-packing", "--json")
    body = json.loads(out)
    assert code == 0
    assert body["summary"]["recorded"] == len(recorded)
    assert body["summary"]["pending"] == len(pending_schedweb())
    assert body["summary"]["counts"][run.SAME] == len(recorded)


def test_a_file_is_backtested_instead_of_the_draft(recorded, published, tmp_path):
    path = tmp_path / "draft.yaml"
    path.write_text(with_filter(BIN_PACKING, "false"))
    code, out = backtest("bin-packing", "--file", str(path), "--json")
    assert code == 0
    assert json.loads(out)["summary"]["counts"][run.UNSCHEDULABLE] == len(recorded)


def test_an_invalid_file_is_reported_with_line_and_column_and_exit_2(published, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(with_filter(BIN_PACKING, "node.name +"))
    err = io.StringIO()
    with pytest.raises(SystemExit) as caught:
        call_command("policy", "backtest", "bin-packing", "--file", str(path), stderr=err)
    assert caught.value.code == 2
    assert re.search(
        rf"^{re.escape(str(path))}:\d+:\d+: .*filters\[0\]\.expression", err.getvalue(), re.M
    ), err.getvalue()


@pytest.mark.parametrize("last", ["0", "2001", "many"])
def test_a_bad_last_is_refused_naming_the_option(published, last):
    with pytest.raises(CommandError, match="--last: "):
        call_command("policy", "backtest", "bin-packing", "--last", last)


def test_an_unknown_version_is_refused(published):
    with pytest.raises(CommandError, match="has no version 7"):
        call_command("policy", "backtest", "bin-packing", "--version", "7")
