"""The protocol-only extender of `make bench` (bench/passthrough.py) speaks the protocol as the
product does: every candidate passes, every candidate gets the same score, a malformed body is
a 400 naming the field. Its throughput is only a fair ceiling if its answers are real ones, from
the shipped listener: the last test starts it on loopback and asks it over HTTP."""

from __future__ import annotations

import http.client

import orjson

from bench.passthrough import SCORE, _filter, _prioritize
from tests.e2e.stack import RedisServer
from tests.listeners import start_extender

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


def test_the_listener_answers_from_the_direct_path_with_the_replaced_verbs(tmp_path):
    redis = RedisServer(tmp_path / "redis").start()
    process = None
    try:
        process, port = start_extender(tmp_path, redis_url=redis.url, module="bench.passthrough")
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            for verb, expected in (
                ("filter", NAMES),
                ("prioritize", [{"Host": name, "Score": SCORE} for name in NAMES]),
            ):
                connection.request(
                    "POST",
                    f"/extender/{verb}",
                    body=args_body(go_pod("p"), NAMES),
                    headers={"Content-Type": "application/json"},
                )
                response = connection.getresponse()
                body = orjson.loads(response.read())
                assert response.status == 200
                assert response.getheader("X-Schedweb-Policy") == "passthrough"
                assert (body["NodeNames"] if verb == "filter" else body) == expected
        finally:
            connection.close()
    finally:
        if process is not None:
            process.stop(grace=5)
        redis.stop()
