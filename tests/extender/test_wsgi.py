"""The direct WSGI route for extender calls answers exactly like the Django views."""

from __future__ import annotations

import io

import orjson
import pytest

from schedweb.wsgi import application

from .conftest import args_body, example, go_pod, post

pytestmark = pytest.mark.django_db


def call(
    method: str, path: str, body: bytes = b"", *, length: int | None = None
) -> tuple[str, dict, bytes]:
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "HTTP_HOST": "127.0.0.1:8000",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": io.StringIO(),
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body) if length is None else length),
    }
    seen: dict = {}

    def start_response(status, headers, exc_info=None):
        seen["status"], seen["headers"] = status, dict(headers)

    chunks = application(environ, start_response)
    return seen["status"], seen["headers"], b"".join(chunks)


def test_the_direct_route_and_the_django_view_give_the_same_answer(client, publish):
    publish(example("seed-003-name-length"))
    for verb in ("filter", "prioritize", "preempt"):
        body = args_body(go_pod("abc"), ["cp-1", "a-small-1"])
        if verb == "preempt":
            body = orjson.dumps(
                {
                    "Pod": go_pod("abc"),
                    "NodeNameToMetaVictims": {
                        "cp-1": {"Pods": [{"UID": "u"}], "NumPDBViolations": 0}
                    },
                }
            )
        status, headers, direct = call("POST", f"/extender/{verb}", body)
        django = post(client, verb, body)
        assert status == "200 OK" and direct == django.content
        assert (
            headers["X-Schedweb-Policy"] == django["X-Schedweb-Policy"] == "seed-003-name-length/v1"
        )
        assert headers["Content-Type"] == "application/json" and headers["Content-Length"] == str(
            len(direct)
        )


def test_the_direct_route_refuses_bad_and_oversized_bodies(settings, publish):
    publish(example("seed-003-name-length"))
    status, _, body = call("POST", "/extender/filter", b"{nope")
    assert status == "400 Bad Request" and b"not JSON" in body
    settings.SCHEDWEB_EXTENDER_MAX_BODY_BYTES = 100
    status, _, body = call("POST", "/extender/filter", b"x" * 200)
    assert status == "413 Payload Too Large" and b"the limit is 100" in body


def test_other_requests_still_reach_django(publish):
    assert call("GET", "/extender/filter")[0].startswith("405")
    assert call("POST", "/extender/filter/", b"{}")[0].startswith("404")
    assert call("POST", "/extender/other", b"{}")[0].startswith("404")
