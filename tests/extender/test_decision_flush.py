"""The listener's sampled decisions reach the Decision table (policies/extender/runtime.py,
_flush_decisions): encoded by orjson on the runtime's thread and decoded by the task, or, for a
batch orjson cannot encode, handed to kombu as they are; a payload that is not a JSON list is
dropped by the task with a warning, never stored half or raised."""

from __future__ import annotations

import pytest

from policies.extender import entry
from policies.publishing import active_entries_write
from policies.tasks.decisions import decisions_record

from .conftest import ROOM, active_entry, args_body, demo_node_objects, go_pod, runtime_by_hand

NAMES = [n["metadata"]["name"] for n in demo_node_objects()]


def _sampled(state, pod_name: str) -> None:
    active_entries_write([active_entry(ROOM, 1)])
    state.registry.refresh_from_redis()
    state.decisions.take()
    for verb in ("filter", "prioritize"):
        entry.extender_answer_or_wait(verb, args_body(go_pod(pod_name)), inline=True)
        entry.after_answer()


@pytest.mark.django_db(transaction=True)
def test_a_flush_stores_every_sampled_decision_with_all_its_nodes(extender_redis, eager_celery):
    from policies.models import Decision

    state = runtime_by_hand()
    _sampled(state, "web-1")
    state._flush_decisions()
    # filter is recorded only when prioritize does not follow (at most one node passed)
    (row,) = Decision.objects.filter(pod_name="web-1")
    assert (row.verb, row.policy_name, row.policy_version) == ("prioritize", "room", 1)
    assert sorted(node["n"] for node in row.nodes["nodes"]) == sorted(NAMES)
    assert row.nodes["scores"] == ["free"] and row.nodes["winners"]
    assert all("norm" in node for node in row.nodes["nodes"] if node["ok"])


@pytest.mark.django_db(transaction=True)
def test_a_batch_orjson_cannot_encode_is_queued_as_it_is(extender_redis, eager_celery):
    from policies.models import Decision

    state = runtime_by_hand()
    _sampled(state, "web-2")
    records = state.decisions.take()
    records[0]["nodes"][0]["raw"] = [2**70]  # past 64 bits: orjson raises, kombu's JSON does not
    for record in records:
        state.decisions.append(record)
    state._flush_decisions()
    (row,) = Decision.objects.filter(pod_name="web-2")
    assert row.nodes["nodes"][0]["raw"] == [2**70]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "payload",
    ["not json", '{"kind": "decision"}', "[", "null", "[" * 100_000 + "]" * 100_000],
    ids=["text", "object", "truncated", "null", "nested-100000-deep"],
)
def test_a_payload_that_is_not_a_json_list_is_dropped(payload, caplog):
    from policies.models import Decision

    assert decisions_record.run(payload) == 0
    assert not Decision.objects.exists()
    assert "dropped a batch of sampled decisions" in caplog.text


@pytest.mark.django_db
def test_a_list_of_things_that_are_not_records_stores_nothing_and_raises_nothing():
    from policies.models import Decision

    hostile = '[1, "x", null, [], {"kind": "decision"}, {"kind": "decision", "nodes": "all"}]'
    assert decisions_record.run(hostile) == 0
    assert not Decision.objects.exists()
