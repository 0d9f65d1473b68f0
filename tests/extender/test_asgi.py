"""The ASGI entry point answers kube-scheduler before Django and hands everything else to it."""

from __future__ import annotations

import orjson
import pytest

from schedweb import asgi
from tests.asgiclient import asgi_request, run

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
    response = asgi_request("POST", "/extender/filter", GO_BODY, chunk=7)
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response["Content-Length"] == str(len(response.content))
    answer = response.json()
    assert answer["NodeNames"] == ["n1", "n2"] and answer["Error"] == ""


@pytest.mark.django_db
def test_prioritize_of_a_pod_no_policy_targets_is_an_empty_list():
    response = asgi_request("POST", "/extender/prioritize", GO_BODY)
    assert (response.status_code, response.content) == (200, b"[]")


@pytest.mark.django_db
def test_a_malformed_body_is_a_400_with_a_json_error():
    response = asgi_request("POST", "/extender/filter", b"{not json")
    assert response.status_code == 400 and "error" in response.json()


@pytest.mark.django_db
def test_an_oversized_body_is_refused_without_reading_it_all(settings):
    settings.SCHEDWEB_EXTENDER_MAX_BODY_BYTES = 100
    response = asgi_request("POST", "/extender/filter", b"x" * 1000, chunk=64)
    assert response.status_code == 413 and "the limit is 100 bytes" in response.json()["detail"]


@pytest.mark.django_db
def test_other_requests_go_to_django():
    assert asgi_request("GET", "/extender/filter").status_code == 405  # Django's view: POST only
    response = asgi_request("GET", "/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})
    assert asgi_request("POST", "/extender/unknown").status_code == 404


def test_the_lifespan_protocol_is_acknowledged():
    events = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict] = []

    async def receive() -> dict:
        return events.pop(0)

    async def send(message: dict) -> None:
        sent.append(message)

    run(asgi.application({"type": "lifespan"}, receive, send))
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
