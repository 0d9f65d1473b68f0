"""The extender's own listener, over TLS and mutual TLS, with a stock kube-scheduler.

The module stack (conftest) speaks mutual TLS as `make run` does, here with bind enabled; one more
stack here speaks TLS without client certificates. kube-scheduler is configured by
`manage.py schedulerconfig`, whose tlsConfig names the local CA and its client certificate.
"""

from __future__ import annotations

import socket
import ssl
import urllib.error
import urllib.request

import pytest

from tests.harness import resources

from .conftest import create_pod, make_nodes, wait_nodes_known
from .stack import RedisServer, SchedwebStack

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
# Bind enabled: only kube-scheduler's client certificate reaches it.
STACK_ENV = {"SCHEDWEB_EXTENDER_BIND": "1"}

POLICY = """\
name: tls-steer
schedulerNames: [schedweb]
filters:
  - name: only-tls-nodes
    expression: node.name.startsWith("tls-")
"""


@pytest.fixture(scope="module")
def nodes(plane, stack) -> list[str]:
    names = [f"tls-{i:02d}" for i in range(3)] + ["other-00"]
    make_nodes(plane.api, names)
    wait_nodes_known(stack, names)
    return names


@pytest.fixture(scope="module")
def policy(stack):
    version = stack.publish(POLICY, "tls")
    stack.wait_serving("tls-steer", version)
    yield
    stack.deactivate("tls-steer")


def handshake(stack: SchedwebStack, *, client_cert: bool, tls12: bool = False) -> bytes:
    """A TLS handshake and one GET /healthz with Python's ssl client: the answer's first bytes
    (b"" when the server closed the connection); ssl.SSLError when the handshake is refused."""
    context = stack.ssl_context(client_cert=client_cert)
    if tls12:  # the client certificate is checked inside the handshake proper
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    with (
        socket.create_connection(("127.0.0.1", stack.extender_port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        return tls.recv(1024)


def test_the_configuration_names_https_and_the_tls_files(stack):
    config = stack.scheduler_config("--scheduler-name", "schedweb", "--bind", "--second-scheduler")
    assert f"urlPrefix: {stack.extender_url}/extender/" in config
    assert "enableHTTPS: true" in config
    for name in ("caFile", "certFile", "keyFile"):
        assert f"{name}: {stack.tls_dir}" in config


def test_a_client_without_a_certificate_is_refused_at_the_handshake(stack):
    for tls12 in (False, True):
        assert handshake(stack, client_cert=True, tls12=tls12).startswith(b"HTTP/1.1 200")
    with pytest.raises(ssl.SSLError):
        handshake(stack, client_cert=False, tls12=True)
    # TLS 1.3 sends the client's (missing) certificate after the client's handshake is done: the
    # server's alert arrives as an ssl error on the first read, or as the connection closed
    try:
        answer = handshake(stack, client_cert=False)
    except ssl.SSLError:
        answer = b""
    assert answer == b""
    plain = urllib.request.Request(f"http://127.0.0.1:{stack.extender_port}/healthz")
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(plain, timeout=10).read()


def test_pods_land_and_bind_through_the_bind_verb_over_mutual_tls(plane, stack, nodes, policy):
    config = stack.scheduler_config("--scheduler-name", "schedweb", "--bind", "--second-scheduler")
    assert "bindVerb: bind" in config
    with plane.start_scheduler(config):
        for i in range(3):
            create_pod(plane.api, f"mtls-pod-{i}")
        for i in range(3):
            node = resources.pod_wait_bound(api=plane.api, name=f"mtls-pod-{i}")
            assert node.startswith("tls-")


def test_with_bind_and_resource_scoping_a_default_scheduler_pod_is_bound_without_the_extender(
    plane, stack, nodes, policy
):
    # The configuration schedulerconfig gives for bind beside the default-scheduler profile.
    config = stack.scheduler_config(
        "--scheduler-name", "schedweb", "--bind", "--scoping", "resource"
    )
    assert "bindVerb: bind" in config and "- schedulerName: default-scheduler" in config
    opted_in = resources.pod_manifest(name="opted-in", scheduler_name="schedweb")
    opted_in["spec"]["containers"][0]["resources"]["limits"] = {"schedweb.io/scheduled": "1"}
    opted_in["spec"]["containers"][0]["resources"]["requests"]["schedweb.io/scheduled"] = "1"
    with plane.start_scheduler(config):
        create_pod(plane.api, "plain-default", scheduler="default-scheduler")
        resources.pod_create(api=plane.api, manifest=opted_in)
        # The extender refuses to bind a pod no policy targets (tests/extender/test_protocol.py):
        # bound at all means DefaultBinder bound it, not the extender.
        resources.pod_wait_bound(api=plane.api, name="plain-default")
        # The opted-in pod went through the extender: its filter kept it on tls- nodes.
        assert resources.pod_wait_bound(api=plane.api, name="opted-in").startswith("tls-")


def test_an_anonymous_bind_binds_nothing(plane, stack, nodes, policy):
    create_pod(plane.api, "anon-bind", scheduler="nobody-schedules-this")
    pod = resources.pod_get(api=plane.api, name="anon-bind")
    body = {
        "PodName": "anon-bind",
        "PodNamespace": "default",
        "PodUID": pod["metadata"]["uid"],
        "Node": "tls-00",
    }
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        stack.extender_request("POST", "/extender/bind", body, client_cert=False)
    # the pages' and API's listener does not answer the extender at all
    status, _answer = stack.request("POST", "/extender/bind", body)
    assert status == 404
    assert resources.pod_get(api=plane.api, name="anon-bind")["spec"].get("nodeName", "") == ""


@pytest.fixture(scope="module")
def tls_stack(plane, tmp_path_factory):
    redis = RedisServer(tmp_path_factory.mktemp("e2e-tls-redis")).start()
    running = SchedwebStack(
        tmp_path_factory.mktemp("e2e-tls-stack"),
        kubeconfig=plane.kubeconfig,
        redis=redis,
        web_workers=1,
        tls="tls",
    )
    try:
        running.start()
        yield running
    finally:
        running.stop()
        redis.stop()


def test_pods_land_over_tls_without_client_certificates(plane, tls_stack, nodes):
    version = tls_stack.publish(POLICY, "tls only")
    tls_stack.wait_serving("tls-steer", version)
    wait_nodes_known(tls_stack, nodes)  # its own watcher and extender
    assert handshake(tls_stack, client_cert=False).startswith(b"HTTP/1.1 200")
    config = tls_stack.scheduler_config("--scheduler-name", "schedweb")
    assert "caFile:" in config and "certFile:" not in config
    try:
        with plane.start_scheduler(config):
            create_pod(plane.api, "tls-pod")
            node = resources.pod_wait_bound(api=plane.api, name="tls-pod")
            assert node.startswith("tls-")
    finally:
        tls_stack.deactivate("tls-steer")
