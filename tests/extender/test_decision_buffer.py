"""Sampled decisions: a token bucket decides before a record is built; records handed over as
callables are built when the buffer is drained, never in the request."""

from __future__ import annotations

import time

from policies.extender.decisions import DecisionBuffer


def test_the_bucket_allows_its_rate_then_refuses_until_it_refills(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    buffer = DecisionBuffer(per_second=3)
    assert [buffer.wanted() for _ in range(5)] == [True, True, True, False, False]
    clock[0] += 0.5  # half a second refills 1.5 tokens
    assert [buffer.wanted() for _ in range(3)] == [True, False, False]
    clock[0] += 60  # the bucket never holds more than one second's worth
    assert sum(buffer.wanted() for _ in range(10)) == 3


def test_deferred_records_are_built_on_take_in_order_and_a_broken_one_is_skipped():
    built: list[str] = []
    buffer = DecisionBuffer(per_second=10)

    def later(name: str):
        def build() -> dict:
            built.append(name)
            return {"kind": "decision", "pod": name}

        return build

    def broken() -> dict:
        raise ValueError("columns gone")

    buffer.append(later("a"))
    buffer.append({"kind": "chosen", "podUid": "u1", "node": "n1"})
    buffer.append(broken)
    buffer.append(later("b"))
    assert built == []  # nothing built while the requests ran
    assert buffer.take() == [
        {"kind": "decision", "pod": "a"},
        {"kind": "chosen", "podUid": "u1", "node": "n1"},
        {"kind": "decision", "pod": "b"},
    ]
    assert built == ["a", "b"] and buffer.take() == []
