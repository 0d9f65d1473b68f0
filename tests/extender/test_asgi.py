"""The ASGI entry point answers kube-scheduler before Django and hands everything else to it."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest

from schedweb import asgi


def run(coroutine) -> None:
    """asyncio.run in a thread of its own: the browser tests' Playwright keeps an event loop
    running in the main thread for the whole session."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, coroutine).result()


def call(method: str, path: str, body: bytes = b"", chunk: int = 0) -> tuple[int, dict, bytes]:
    """One request through schedweb.asgi.application; (status, headers, body)."""
    parts = [body[i : i + chunk] for i in range(0, len(body), chunk)] if chunk else [body]
    messages = [
        {"type": "http.request", "body": part, "more_body": i < len(parts) - 1}
        for i, part in enumerate(parts)
    ]
    sent: list[dict] = []

    async def receive() -> dict:
        if messages:
            return messages.pop(0)
        await asyncio.Event().wait()  # the client stays connected until the answer is sent
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    run(asgi.application(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, payload


GO_BODY = orjson.dumps(
    {
        "Pod": {
            "metadata": {"name": "web-1", "namespace": "default", "uid": "u-1"},
            "spec": {"schedulerName": "nobody-targets-this", "containers": [{"name": "c"}]},
        },
        "Nodes": None,
        "NodeNames": ["n1", "n2"],
    }
)


@pytest.mark.django_db
def test_filter_is_answered_before_django_in_pascal_case():
    status, headers, body = call("POST", "/extender/filter", GO_BODY, chunk=7)
    assert status == 200 and headers["content-type"] == "application/json"
    assert headers["content-length"] == str(len(body))
    answer = orjson.loads(body)
    assert answer["NodeNames"] == ["n1", "n2"] and answer["Error"] == ""


@pytest.mark.django_db
def test_prioritize_of_a_pod_no_policy_targets_is_an_empty_list():
    assert call("POST", "/extender/prioritize", GO_BODY)[::2] == (200, b"[]")


@pytest.mark.django_db
def test_a_malformed_body_is_a_400_with_a_json_error():
    status, _, body = call("POST", "/extender/filter", b"{not json")
    assert status == 400 and "error" in orjson.loads(body)


@pytest.mark.django_db
def test_an_oversized_body_is_refused_without_reading_it_all(settings):
    settings.SCHEDWEB_EXTENDER_MAX_BODY_BYTES = 100
    status, _, body = call("POST", "/extender/filter", b"x" * 1000, chunk=64)
    assert status == 413 and "the limit is 100 bytes" in body.decode()


@pytest.mark.django_db
def test_other_requests_go_to_django():
    assert call("GET", "/extender/filter")[0] == 405  # Django's view: POST only
    status, _, body = call("GET", "/healthz")
    assert (status, orjson.loads(body)) == (200, {"status": "ok"})
    assert call("POST", "/extender/unknown")[0] == 404


def test_the_lifespan_protocol_is_acknowledged():
    events = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict] = []

    async def receive() -> dict:
        return events.pop(0)

    async def send(message: dict) -> None:
        sent.append(message)

    run(asgi.application({"type": "lifespan"}, receive, send))
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
