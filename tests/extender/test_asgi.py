"""The extender has its own ASGI application (its own listener): it answers everything under
/extender/ itself, and /healthz; the web application (pages and API) answers /extender/ with a 404
and hands every other request to Django; neither Django's URLs nor the WSGI entry serve it."""

from __future__ import annotations

import io

import orjson
import pytest
from django.urls import Resolver404, resolve

from policies.extender.entry import VERBS
from policies.extender.runtime import runtime
from schedweb import asgi
from tests.asgiclient import asgi_lifespan_startup, asgi_request, extender_post, run

from .conftest import args_body, example, go_pod

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
    response = extender_post("prioritize", GO_BODY)
    assert (response.status_code, response.content) == (200, b"[]")


@pytest.mark.django_db
def test_each_verb_sends_the_services_answer_with_its_policy_header(publish):
    publish(example("seed-003-name-length"))
    preempt = orjson.dumps(
        {
            "Pod": go_pod("abc"),
            "NodeNameToMetaVictims": {"cp-1": {"Pods": [{"UID": "u"}], "NumPDBViolations": 0}},
        }
    )
    bodies = {
        "filter": args_body(go_pod("abc"), ["cp-1", "a-small-1"]),
        "prioritize": args_body(go_pod("abc"), ["cp-1", "a-small-1"]),
        "preempt": preempt,
    }
    for verb, body in bodies.items():
        response = extender_post(verb, body)
        direct = getattr(runtime().extender, verb)(body)
        assert (response.status_code, response.content) == (200, direct.body)
        assert response["X-Schedweb-Policy"] == direct.policy == "seed-003-name-length/v1"
        assert response["Content-Type"] == "application/json"
        assert response["Content-Length"] == str(len(direct.body))


@pytest.mark.django_db
def test_a_malformed_body_is_a_400_with_a_json_error():
    response = extender_post("filter", b"{not json")
    assert response.status_code == 400 and "not JSON" in response.json()["detail"]


@pytest.mark.django_db
def test_an_oversized_body_is_refused_without_reading_it_all(settings):
    settings.SCHEDWEB_EXTENDER_MAX_BODY_BYTES = 100
    for verb in VERBS:
        response = asgi_request("POST", f"/extender/{verb}", b"x" * 1000, chunk=64)
        assert response.status_code == 413 and response["Content-Type"] == "application/json"
        assert response.json()["detail"] == "the body is larger; the limit is 100 bytes"
    assert extender_post("filter", b"x" * 100).status_code == 400  # at the limit: read and parsed


def test_no_request_under_extender_reaches_django(monkeypatch):
    async def django_application(scope, receive, send):
        raise AssertionError(f"{scope['method']} {scope['path']} reached Django")

    monkeypatch.setattr(asgi, "django_application", django_application)
    get = asgi_request("GET", "/extender/filter")
    assert (get.status_code, get["Allow"], get["Content-Type"]) == (405, "POST", "application/json")
    assert asgi_request("HEAD", "/extender/bind").status_code == 405
    assert asgi_request("POST", "/extender/unknown", b"{}").json()["error"] == "not_found"
    assert asgi_request("PUT", "/extender/filter/").status_code == 404


@pytest.mark.django_db
def test_other_requests_go_to_django():
    response = asgi_request("GET", "/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


@pytest.mark.django_db
@pytest.mark.parametrize("verb", VERBS)
def test_the_web_listener_does_not_answer_the_extender(monkeypatch, publish, verb):
    async def django_application(scope, receive, send):
        raise AssertionError(f"{scope['method']} {scope['path']} reached Django")

    monkeypatch.setattr(asgi, "django_application", django_application)
    publish(example("seed-003-name-length"))
    response = asgi_request("POST", f"/extender/{verb}", GO_BODY, app="web")
    assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert "x-schedweb-policy" not in response.headers


@pytest.mark.django_db
def test_the_extender_listener_answers_healthz_readyz_metrics_and_nothing_else():
    response = asgi_request("GET", "/healthz", app="extender")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})
    assert "extender" in asgi_request("GET", "/readyz", app="extender").json()
    metrics = asgi_request("GET", "/metrics", app="extender")
    assert (
        metrics.status_code == 200 and b"# TYPE schedweb_extender_requests_total" in metrics.content
    )
    assert asgi_request("POST", "/metrics", app="extender").status_code == 405
    for path in ("/", "/api/v1/policies/", "/admin/"):
        assert asgi_request("GET", path, app="extender").status_code == 404


@pytest.mark.django_db
def test_the_web_listener_has_no_metrics_of_its_own(client):
    # its processes count nothing: /metrics is the extender listener's
    assert client.get("/metrics").status_code == 404


@pytest.mark.django_db
def test_the_extender_refuses_hosts_not_allowed(settings):
    settings.SCHEDWEB_EXTENDER_ALLOWED_HOSTS = ["127.0.0.1", "extender.example"]
    for host in (b"127.0.0.1", b"127.0.0.1:8443", b"extender.example:443"):
        assert extender_post_host(host).status_code == 200
    for host in (b"evil.example", b"evil.example:8443", b"", None):
        response = extender_post_host(host)
        assert response.status_code == 400 and response.json() == {"Error": "Host not allowed"}
    assert asgi_request("GET", "/healthz", host=b"evil.example").status_code == 400


def extender_post_host(host):
    return asgi_request("POST", "/extender/filter", GO_BODY, host=host)


@pytest.mark.django_db
@pytest.mark.parametrize("verb", VERBS)
def test_the_extender_requires_a_json_content_type(verb):
    for content_type in (b"text/plain", b"application/x-www-form-urlencoded", b"", None):
        response = asgi_request("POST", f"/extender/{verb}", GO_BODY, content_type=content_type)
        assert response.status_code == 415, content_type
        assert response.json() == {"Error": "Content-Type must be application/json"}
    for content_type in (b"application/json; charset=utf-8", b"Application/JSON"):
        response = asgi_request("POST", f"/extender/{verb}", GO_BODY, content_type=content_type)
        assert response.status_code != 415


@pytest.mark.parametrize("verb", VERBS)
def test_no_django_url_serves_the_extender(verb):
    with pytest.raises(Resolver404):
        resolve(f"/extender/{verb}")


@pytest.mark.django_db
def test_the_wsgi_application_does_not_serve_the_extender(publish):
    from schedweb.wsgi import application

    publish(example("seed-003-name-length"))
    body = args_body(go_pod("abc"), ["cp-1"])
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/extender/filter",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "HTTP_HOST": "127.0.0.1:8000",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": io.StringIO(),
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
    }
    seen: list[str] = []
    answer = b"".join(
        application(environ, lambda status, headers, exc_info=None: seen.append(status))
    )
    assert seen[0].startswith("404") and b"NodeNames" not in answer


def test_the_lifespan_protocol_is_acknowledged():
    events = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict] = []

    async def receive() -> dict:
        return events.pop(0)

    async def send(message: dict) -> None:
        sent.append(message)

    run(asgi.application({"type": "lifespan"}, receive, send))
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_the_extender_listener_builds_its_runtime_and_bind_client_at_startup(
    settings, extender_redis, tmp_path, monkeypatch
):
    from policies.cluster import live
    from policies.extender import runtime as runtime_module

    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    settings.SCHEDWEB_CLUSTER_SOURCE = "live"
    settings.SCHEDWEB_KUBECONFIG = tmp_path / "kubeconfig"
    settings.SCHEDWEB_EXTENDER_BIND = True
    monkeypatch.setattr(live, "_binder", None)
    monkeypatch.setattr(asgi, "_ready", asgi._ready)  # restored for the tests after this one
    runtime_module.reset_runtime()
    sent = asgi_lifespan_startup(app="extender")
    assert [m["type"] for m in sent] == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    # before any request: the runtime, its binder and a configured Kubernetes client
    assert runtime_module._runtime is not None
    assert runtime_module._runtime.extender._binder is live.bind_pod
    assert live._binder is not None and live._binder._api is not None
    assert live._binder.server == "https://127.0.0.1:9"


def test_the_web_listener_starts_no_extender_runtime(extender_redis):
    from policies.extender import runtime as runtime_module

    runtime_module.reset_runtime()
    asgi_lifespan_startup(app="web")
    assert runtime_module._runtime is None


def test_a_client_gone_mid_body_gets_no_answer_and_is_not_counted(publish):
    publish(example("seed-003-name-length"))
    metrics = runtime().metrics
    before = metrics.totals()
    messages = [
        {"type": "http.request", "body": GO_BODY[:10], "more_body": True},
        {"type": "http.disconnect"},  # what uvicorn says when the body timeout cut it off
    ]
    sent = []

    async def receive():
        return messages.pop(0)

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/extender/filter",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
    }
    run(asgi.extender_application(scope, receive, send))
    assert sent == []
    assert metrics.totals() == before  # not a bad request: there was no request
