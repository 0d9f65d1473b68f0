"""The protocol-only extender of `make bench` (bench/passthrough.py) speaks the protocol as the
product does: every candidate passes, every candidate gets the same score, a malformed body is
a 400 naming the field. Its throughput is only a fair ceiling if its answers are real ones."""

from __future__ import annotations

import orjson

from bench.passthrough import SCORE, _filter, _prioritize

from .conftest import args_body, go_pod

NAMES = ["cp-1", "a-small-1", "node-with-\u00e9"]


def test_filter_passes_every_candidate_in_the_protocols_shape():
    answer = _filter(None, args_body(go_pod("p"), NAMES))
    assert answer.status == 200
    assert orjson.loads(answer.body) == {
        "Nodes": None,
        "NodeNames": NAMES,
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }


def test_prioritize_scores_every_candidate_alike():
    answer = _prioritize(None, args_body(go_pod("p"), NAMES))
    assert answer.status == 200
    assert orjson.loads(answer.body) == [{"Host": name, "Score": SCORE} for name in NAMES]


def test_a_malformed_body_is_a_400_naming_the_field():
    body = orjson.dumps({"Pod": go_pod("p"), "NodeNames": ["cp-1", 7]})
    for verb in (_filter, _prioritize):
        answer = verb(None, body)
        assert answer.status == 400
        assert "NodeNames[1]" in orjson.loads(answer.body)["detail"]
