"""The extender's wire protocol with bodies as kube-scheduler sends them, in both node modes."""

from __future__ import annotations

import random

import orjson
import pytest

from policies.extender.protocol import (
    Limits,
    TooMuchWork,
    parse_extender_args,
    parse_preemption_args,
)
from policies.extender.runtime import runtime
from policies.extender.service import OFFLOAD, WAIT
from tests.asgiclient import asgi_request, extender_post

from .conftest import args_body, demo_node_objects, example, go_pod

pytestmark = pytest.mark.django_db


def test_filter_rejects_a_long_pod_name_everywhere_with_the_policy_message(publish):
    publish(example("seed-003-name-length"))
    response = extender_post("filter", args_body(go_pod("abcdefg")))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["X-Schedweb-Policy"] == "seed-003-name-length/v1"
    body = orjson.loads(response.content)
    assert set(body) == {"NodeNames", "Nodes", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    assert (
        body["NodeNames"] == []
        and body["Nodes"] is None
        and body["FailedNodes"] == {}
        and body["Error"] == ""
    )
    assert len(body["FailedAndUnresolvableNodes"]) == 36
    assert (
        body["FailedAndUnresolvableNodes"]["cp-1"]
        == "short-pod-name: pod name abcdefg is 7 characters, the limit is 4"
    )


def test_filter_and_prioritize_for_a_short_name_prefer_the_shortest_node_name(publish):
    publish(example("seed-003-name-length"))
    names = ["cp-1", "a-small-1", "worker-medium-a-1"]
    body = orjson.loads(extender_post("filter", args_body(go_pod("abc"), names)).content)
    assert body["NodeNames"] == names and body["FailedAndUnresolvableNodes"] == {}
    response = extender_post("prioritize", args_body(go_pod("abc"), names))
    assert response.status_code == 200
    # 20 - len: cp-1 16, a-small-1 11, worker-medium-a-1 3; minmax over the three:
    # (16-3)*100/13 = 100 -> 10; (11-3)*100/13 = 61.5 -> 6; 0 -> 0
    assert (
        response.content
        == b'[{"Host":"cp-1","Score":10},{"Host":"a-small-1","Score":6},{"Host":"worker-medium-a-1","Score":0}]'
    )


def test_non_cache_capable_filter_echoes_the_passing_node_objects_unmodified(publish):
    publish(example("seed-003-name-length"))
    names = ["cp-1", "a-small-1"]
    body = orjson.loads(extender_post("filter", args_body(go_pod("abc"), names, full=True)).content)
    assert body["NodeNames"] is None
    sent = [n for n in demo_node_objects() if n["metadata"]["name"] in names]
    assert body["Nodes"] == {"metadata": {}, "items": sent}
    rejected = orjson.loads(
        extender_post("filter", args_body(go_pod("abcdefg"), names, full=True)).content
    )
    assert rejected["Nodes"] == {"metadata": {}, "items": []}
    assert set(rejected["FailedAndUnresolvableNodes"]) == set(names)


def test_prioritize_in_both_modes_gives_the_same_integer_scores(publish):
    publish(example("least-allocated"))
    pod = go_pod("web-2", cpu="500m")
    names = [n["metadata"]["name"] for n in demo_node_objects()][:12]
    by_name = orjson.loads(extender_post("prioritize", args_body(pod, names)).content)
    by_object = orjson.loads(extender_post("prioritize", args_body(pod, names, full=True)).content)
    assert by_name == by_object
    assert [e["Host"] for e in by_name] == names
    assert all(type(e["Score"]) is int and 0 <= e["Score"] <= 10 for e in by_name)


def test_pods_of_other_schedulers_pass_through_at_once(publish):
    publish(example("seed-003-name-length"))
    pod = go_pod("abcdefg", scheduler="default-scheduler")
    body = orjson.loads(extender_post("filter", args_body(pod, ["cp-1", "x"])).content)
    assert body == {
        "NodeNames": ["cp-1", "x"],
        "Nodes": None,
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }
    response = extender_post("prioritize", args_body(pod, ["cp-1"]))
    assert response.content == b"[]" and response["X-Schedweb-Policy"] == "none"


def test_keys_in_any_casing_are_accepted(publish):
    publish(example("seed-003-name-length"))
    body = orjson.dumps({"pod": go_pod("abc"), "nodes": None, "nodenames": ["cp-1"]})
    assert orjson.loads(extender_post("filter", body).content)["NodeNames"] == ["cp-1"]


def test_unknown_nodes_pass_with_ignore_and_fail_with_fail(publish):
    policy = example("seed-003-name-length")
    publish(policy)
    body = orjson.loads(
        extender_post("filter", args_body(go_pod("abc"), ["cp-1", "brand-new"])).content
    )
    assert body["NodeNames"] == ["cp-1", "brand-new"]
    publish(policy.replace("failurePolicy: Ignore", "failurePolicy: Fail"))
    body = orjson.loads(
        extender_post("filter", args_body(go_pod("abc"), ["cp-1", "brand-new"])).content
    )
    assert body["NodeNames"] == ["cp-1"]
    assert "no data for this node" in body["FailedNodes"]["brand-new"]
    scores = orjson.loads(
        extender_post("prioritize", args_body(go_pod("abc"), ["cp-1", "brand-new"])).content
    )
    assert scores == [{"Host": "cp-1", "Score": 10}, {"Host": "brand-new", "Score": 0}]


def test_prioritize_answers_in_the_request_order_with_each_name_once_per_mention(publish):
    publish(example("seed-003-name-length"))
    names = ["worker-medium-a-1", "cp-1", "a-small-1", "cp-1"]
    scores = orjson.loads(extender_post("prioritize", args_body(go_pod("abc"), names)).content)
    assert [s["Host"] for s in scores] == names
    by_host = {s["Host"]: s["Score"] for s in scores}
    # seed 003: shorter node names score higher
    assert by_host["cp-1"] > by_host["a-small-1"] > by_host["worker-medium-a-1"]
    assert scores[1] == scores[3]


def test_an_internal_error_follows_the_failure_policy_and_prioritize_answers_empty(
    publish, monkeypatch
):
    policy = example("seed-003-name-length")
    publish(policy)
    served = runtime().registry.by_scheduler["schedweb"]

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    # Pods no other test sends: the process's evaluation cache rightly answers a pod it has
    # seen under the same compiled policy and snapshot without evaluating (an earlier test, in a
    # shuffled order, left "abc" under the Fail version there), so `broken` would not be called.
    monkeypatch.setattr(served.compiled, "evaluate", broken)
    body = orjson.loads(extender_post("filter", args_body(go_pod("boom-open"), ["cp-1"])).content)
    assert body["NodeNames"] == ["cp-1"] and body["Error"] == ""  # Ignore: fail open
    assert extender_post("prioritize", args_body(go_pod("boom-1"), ["cp-1"])).content == b"[]"
    publish(policy.replace("failurePolicy: Ignore", "failurePolicy: Fail"))
    served = runtime().registry.by_scheduler["schedweb"]
    monkeypatch.setattr(served.compiled, "evaluate", broken)
    body = orjson.loads(extender_post("filter", args_body(go_pod("boom-closed"), ["cp-1"])).content)
    assert (
        body["NodeNames"] == []
        and body["Error"] == "schedweb internal error (details in schedweb's log)"
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b"{}", "Pod must be an object, got null"),
        (
            b'{"Pod": {"metadata": {}}, "NodeNames": []}',
            "Pod.metadata.name must be a string, got null",
        ),
        (
            b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": [1]}',
            "NodeNames[0] must be a string, got number",
        ),
        (
            b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["cp-1", "a-small-1", null]}',
            "NodeNames[2] must be a string, got null",
        ),
        (
            b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["cp-1", "' + b"n" * 254 + b'"]}',
            "NodeNames[1] is longer than 253 characters",
        ),
        (
            b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": null, "Nodes": {"items": [{}]}}',
            "Nodes.items[0].metadata must be an object",
        ),
    ],
)
def test_a_malformed_body_is_a_400_with_a_json_error(publish, body, message):
    publish(example("seed-003-name-length"))
    for verb in ("filter", "prioritize"):
        response = extender_post(verb, body)
        assert response.status_code == 400
        assert message in orjson.loads(response.content)["detail"]


def test_only_post_without_a_trailing_slash_is_served(publish):
    publish(example("seed-003-name-length"))
    for verb in ("filter", "prioritize", "preempt", "bind"):
        response = asgi_request("GET", f"/extender/{verb}")
        assert (response.status_code, response["Allow"]) == (405, "POST")
        assert response.json() == {"error": "bad_request", "detail": f"{verb} takes POST"}
    slash = extender_post("filter/", args_body(go_pod("abc"), ["cp-1"]))
    assert slash.status_code == 404  # never a redirect: Go would turn it into a GET


def test_other_paths_under_extender_are_a_json_404_for_any_method(publish):
    publish(example("seed-003-name-length"))
    for method, path in [
        ("POST", "/extender/filter/"),
        ("POST", "/extender/unknown"),
        ("GET", "/extender/"),
        ("POST", "/extender/Filter"),  # Go appends the configured verb verbatim
    ]:
        response = asgi_request(method, path, b"{}")
        assert (response.status_code, response["Content-Type"]) == (404, "application/json")
        assert response.json() == {"error": "not_found", "detail": f"no such extender verb: {path}"}


def test_answers_need_no_database_query(publish, queries_anywhere):
    """Through the ASGI entry, as served: filter, prioritize and preempt inline on the event loop
    (where a query would raise SynchronousOnlyOperation), bind in a thread (counted here)."""
    publish(example("least-allocated"))
    extender_post("filter", args_body(go_pod("w"), ["cp-1"]))  # warm up (the runtime is ready)
    queries_anywhere.clear()
    for verb in ("filter", "prioritize", "preempt"):
        assert extender_post(verb, args_body(go_pod("w"))).status_code == 200
    binding = {"PodName": "w", "PodNamespace": "default", "PodUID": "u", "Node": "cp-1"}
    assert extender_post("bind", orjson.dumps(binding)).status_code == 200
    assert queries_anywhere == []


def test_preempt_keeps_victims_except_on_nodes_a_filter_says_never_fit(publish):
    publish(example("seed-003-name-length"))
    meta = {
        "cp-1": {"Pods": [{"UID": "u1"}], "NumPDBViolations": 0},
        "a-small-1": {"Pods": [{"UID": "u2"}, {"UID": "u3"}], "NumPDBViolations": 1},
    }
    kept = orjson.loads(
        extender_post(
            "preempt",
            orjson.dumps(
                {"Pod": go_pod("abc"), "NodeNameToVictims": None, "NodeNameToMetaVictims": meta}
            ),
        ).content
    )
    assert kept == {"NodeNameToMetaVictims": meta}
    dropped = orjson.loads(
        extender_post(
            "preempt",
            orjson.dumps(
                {"Pod": go_pod("abcdefg"), "NodeNameToVictims": None, "NodeNameToMetaVictims": meta}
            ),
        ).content
    )
    assert dropped == {"NodeNameToMetaVictims": {}}
    full = {"cp-1": {"Pods": [go_pod("victim", uid="u9")], "NumPDBViolations": 0}}
    converted = orjson.loads(
        extender_post(
            "preempt",
            orjson.dumps(
                {"Pod": go_pod("abc"), "NodeNameToVictims": full, "NodeNameToMetaVictims": None}
            ),
        ).content
    )
    assert converted == {
        "NodeNameToMetaVictims": {"cp-1": {"Pods": [{"UID": "u9"}], "NumPDBViolations": 0}}
    }


def test_bind_is_off_unless_enabled_and_binds_nothing(publish):
    publish(example("seed-003-name-length"))
    body = orjson.dumps(
        {"PodName": "abc", "PodNamespace": "default", "PodUID": "u", "Node": "cp-1"}
    )
    response = extender_post("bind", body)
    assert response.status_code == 200
    assert orjson.loads(response.content)["Error"] == "schedweb does not bind pods here"
    assert extender_post("bind", b'{"PodName": ""}').status_code == 400


def test_bind_enabled_needs_the_settings_and_the_live_source(settings):
    from policies.extender.runtime import binder

    settings.SCHEDWEB_EXTENDER_BIND = True
    assert binder() is None  # demo source: nothing to bind with
    settings.SCHEDWEB_CLUSTER_SOURCE, settings.SCHEDWEB_EXTENDER_BIND = "live", False
    assert binder() is None


def _pending_pod(*, scheduler: str):
    """A pending pod of the demo snapshot whose schedulerName is `scheduler` and whose name
    seed-003 admits (at most 4 characters), so that a bind to an untainted node may go ahead."""
    state = runtime().snapshots.current().state
    return next(
        p
        for p in state.pods()
        if not p["nodeName"] and p["schedulerName"] == scheduler and len(p["name"]) < 5
    )


def test_a_failing_bind_reveals_nothing_of_the_error(publish, monkeypatch):
    from policies.extender.service import BIND_FAILED

    publish(example("seed-003-name-length"))
    pod = _pending_pod(scheduler="schedweb")

    def forbidden(args):
        raise RuntimeError('pods "x" is forbidden: User "system:serviceaccount:schedweb:schedweb"')

    monkeypatch.setattr(runtime().extender, "_binder", forbidden)
    body = {"PodName": pod["name"], "PodNamespace": pod["namespace"], "PodUID": pod["uid"]}
    response = extender_post("bind", orjson.dumps({**body, "Node": "a-small-1"}))
    assert response.json() == {"Error": BIND_FAILED}


def test_fuzzed_bodies_never_produce_a_500(publish):
    publish(
        example("least-allocated"), example("seed-003-name-length").replace("[schedweb]", "[other]")
    )
    rng = random.Random(5)
    valid = args_body(go_pod("w", cpu="250m"), ["cp-1", "a-small-1", "b-large-1"])
    for _ in range(400):
        data = bytearray(valid)
        for _ in range(rng.randint(1, 8)):
            op = rng.random()
            position = rng.randrange(len(data))
            if op < 0.4:
                data[position] = rng.randrange(256)
            elif op < 0.7:
                del data[position : position + rng.randint(1, 20)]
            else:
                data[position:position] = rng.choice(
                    [b"null", b"{}", b"[]", b'"x"', b"-1e999", b"\\u0000", b",", b"9" * 30]
                )
        for verb in ("filter", "prioritize", "preempt", "bind"):
            response = extender_post(verb, bytes(data))
            assert response.status_code in (200, 400), (
                verb,
                bytes(data)[:200],
                response.content[:200],
            )
            orjson.loads(response.content)


def metrics_text() -> str:
    response = asgi_request("GET", "/metrics", app="extender")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return response.content.decode()


def test_metrics_count_requests_latency_and_decisions(publish, extender_redis):
    publish(example("seed-003-name-length"))
    extender_post("filter", args_body(go_pod("abc"), ["cp-1", "a-small-1"]))
    extender_post("prioritize", args_body(go_pod("abc"), ["cp-1", "a-small-1"]))
    extender_post("filter", b"nope")
    extender_redis.flushdb()  # the counts live in the process, not in Redis
    text = metrics_text()
    assert 'schedweb_extender_requests_total{verb="filter",code="200"} 1' in text
    assert 'schedweb_extender_requests_total{verb="filter",code="400"} 1' in text
    assert 'schedweb_extender_errors_total{verb="filter",kind="bad_request"} 1' in text
    assert (
        'schedweb_extender_decisions_total{policy="seed-003-name-length",version="1",verb="prioritize"} 1'
        in text
    )
    assert 'schedweb_extender_request_duration_seconds_count{verb="prioritize"} 1' in text
    assert "schedweb_extender_policies_active 1" in text


def test_bind_is_counted_under_its_policy_not_as_pass_through(publish, monkeypatch):
    publish(example("seed-003-name-length"))
    monkeypatch.setattr(runtime().extender, "_binder", lambda args: "")
    pod = _pending_pod(scheduler="schedweb")
    body = {"PodName": pod["name"], "PodNamespace": pod["namespace"], "PodUID": pod["uid"]}
    before = metrics_text()
    assert extender_post("bind", orjson.dumps({**body, "Node": "a-small-1"})).json() == {
        "Error": ""
    }
    after = metrics_text()
    counted = (
        'schedweb_extender_decisions_total{policy="seed-003-name-length",version="1",verb="bind"}'
    )
    assert f"{counted} 1" in after and counted not in before
    assert 'schedweb_extender_passthrough_total{verb="bind"}' not in after


@pytest.mark.parametrize(
    "pairs",
    [
        [("node-a", 0), ("node-b", 10), ("node-c", 7)],
        [('we"ird\\name', 3), ("ünïcode-節点", 5), ("node-a", 1)],
        [("node-a", True), ("node-b", 7.0), ("node-c", 7.9)],  # int() of each, as Go needs
        [("node-a", 11), ("node-b", -1), ("node-c", 10**12)],  # outside 0..10: still ints
        [],
    ],
)
def test_the_host_priority_list_is_the_bytes_orjson_writes_cold_and_warm(pairs):
    from policies.extender import protocol

    expected = orjson.dumps([{"Host": host, "Score": int(score)} for host, score in pairs])
    protocol._HOSTS.clear()
    assert protocol.host_priority_list(iter(pairs)) == expected  # names seen for the first time
    assert protocol.host_priority_list(pairs) == expected  # and again, from the encoded names
    assert orjson.loads(expected) == [{"Host": h, "Score": int(s)} for h, s in pairs]


def test_the_encoded_host_names_are_bounded(monkeypatch):
    from policies.extender import protocol

    monkeypatch.setattr(protocol, "_HOSTS_MAX", 100)
    protocol._HOSTS.clear()
    for i in range(10):
        protocol.host_priority_list([(f"n{i}-{j}", 1) for j in range(50)])
        assert len(protocol._HOSTS) <= 150


# --- work, not bytes (issue 27) -----------------------------------------------------------


def _bare_nodes(count: int) -> list[dict]:
    return [{"metadata": {"name": f"n{i}"}} for i in range(count)]


@pytest.mark.parametrize(
    ("body", "limits"),
    [
        ({"Pod": go_pod("abc"), "Nodes": {"items": _bare_nodes(11)}}, Limits(10, 10_000)),
        ({"Pod": go_pod("abc"), "NodeNames": [f"n{i}" for i in range(11)]}, Limits(10_000, 10)),
        # found before anything else is checked: not even the pod is read
        ({"Pod": "not a pod", "Nodes": {"items": _bare_nodes(11)}}, Limits(10, 10_000)),
    ],
    ids=["node-objects", "node-names", "before-any-check"],
)
def test_a_request_with_more_items_than_the_inline_limits_is_too_much_work(body, limits):
    data = orjson.dumps(body)
    with pytest.raises(TooMuchWork):
        parse_extender_args(data, limits)
    if isinstance(body["Pod"], dict):
        assert parse_extender_args(data).node_names  # without limits: parsed as ever


def test_preempt_counts_candidate_nodes_and_victim_pod_objects():
    victims = {f"n{i}": {"Pods": [go_pod(f"v{i}-{j}") for j in range(3)]} for i in range(4)}
    body = orjson.dumps({"Pod": go_pod("abc"), "NodeNameToVictims": victims})
    with pytest.raises(TooMuchWork):
        parse_preemption_args(body, Limits(objects=11, names=100))  # 12 victim Pods
    with pytest.raises(TooMuchWork):
        parse_preemption_args(body, Limits(objects=100, names=3))  # 4 candidate nodes
    assert len(parse_preemption_args(body, Limits(objects=12, names=4)).victims) == 4


def test_more_candidates_than_any_cluster_has_is_a_400(monkeypatch):
    from policies.extender import protocol

    monkeypatch.setattr(protocol, "MAX_CANDIDATES", 5)
    body = orjson.dumps({"Pod": go_pod("abc"), "NodeNames": [f"n{i}" for i in range(6)]})
    with pytest.raises(protocol.ProtocolError, match="NodeNames has 6 entries; at most 5"):
        parse_extender_args(body)


def test_the_service_leaves_a_request_of_many_items_to_the_pool_only_when_inline(publish):
    publish(example("seed-003-name-length"))
    extender = runtime().extender
    limit = extender.inline_limits.objects
    body = orjson.dumps({"Pod": go_pod("abc"), "Nodes": {"items": _bare_nodes(limit + 1)}})
    assert extender.filter(body, inline=True) is OFFLOAD
    assert OFFLOAD.status != WAIT  # the event loop's caller tells them apart
    assert extender.prioritize(body, inline=True) is OFFLOAD
    answer = extender.filter(body)  # a worker process's call
    assert answer.status == 200
    assert len(orjson.loads(answer.body)["Nodes"]["items"]) == limit + 1
    small = orjson.dumps({"Pod": go_pod("abc"), "Nodes": {"items": _bare_nodes(limit)}})
    assert extender.filter(small, inline=True).status == 200


def test_a_body_with_more_objects_than_could_be_inline_is_not_even_parsed(monkeypatch):
    from policies.extender import protocol

    def parse_fails(body):
        raise AssertionError("parsed")

    limits = Limits(objects=100, names=50)
    objects = orjson.dumps({"Pod": go_pod("abc"), "Nodes": {"items": _bare_nodes(1500)}})
    monkeypatch.setattr(protocol, "_object", parse_fails)
    with pytest.raises(TooMuchWork):
        parse_extender_args(objects, limits)
    monkeypatch.undo()
    # kube-scheduler's names, however many, are parsed (cheaply) and counted
    names = orjson.dumps({"Pod": go_pod("abc"), "Nodes": None, "NodeNames": ["n"] * 51})
    with pytest.raises(TooMuchWork):
        parse_extender_args(names, limits)
    # and names next to objects: the names are what is read, the objects cost only the parse
    both = orjson.dumps(
        {"Pod": go_pod("abc"), "NodeNames": ["cp-1"], "nodes": {"items": _bare_nodes(1500)}}
    )
    assert parse_extender_args(both, limits).node_names == ["cp-1"]
    assert parse_extender_args(args_body(go_pod("abc"), ["cp-1", "a-small-1"]), limits)
