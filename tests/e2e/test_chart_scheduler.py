"""The chart in motion: its second scheduler, run as the stock kube-scheduler with the chart's
ConfigMap content and a token of the chart's ServiceAccount, schedules through the extender over
mutual TLS beside a default scheduler holding its own lease; and two extender processes (two
replicas of the chart's extender Deployment) both serve a publish, one carrying on when the other
is killed.

Own control plane and stack (module fixtures, tests/e2e/conftest.py); the stack's extender speaks
mutual TLS with certificates of scripts/extender-certs.sh.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.deploy.chart import chart_render
from tests.harness import resources

from .conftest import create_pod, make_nodes, wait_nodes_known, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NAMESPACE = "schedweb"
POLICY = """\
name: chart-steer
schedulerNames: [schedweb]
filters:
  - name: only-chart-nodes
    expression: node.name.startsWith("chart-")
"""
# The second scheduler's Secret, as `kubectl create secret` makes it from extender-certs.sh's
# files: key in the Secret (the file name under the pod's mount) -> file here.
SECRET_FILES = {"ca.crt": "ca.crt", "tls.crt": "client.crt", "tls.key": "client.key"}
MOUNT = "/etc/schedweb-tls/"


@pytest.fixture(scope="module")
def nodes(plane, stack) -> list[str]:
    names = [f"chart-{i:02d}" for i in range(2)] + [f"other-{i:02d}" for i in range(2)]
    make_nodes(plane.api, names)
    wait_nodes_known(stack, names)
    return names


@pytest.fixture(scope="module")
def policy(stack):
    version = stack.publish(POLICY, "chart")
    stack.wait_serving("chart-steer", version)
    yield version
    stack.deactivate("chart-steer")


def _create(api, obj) -> dict:
    kind_paths = {
        "ServiceAccount": f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
        "ConfigMap": f"/api/v1/namespaces/{NAMESPACE}/configmaps",
        "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "Role": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/roles",
        "RoleBinding": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/rolebindings",
    }
    return api.post(kind_paths[obj["kind"]], obj)


def _installed_scheduler(plane) -> tuple[str, str]:
    """Creates the chart's second-scheduler objects (all but its Deployment) for real; returns
    the ConfigMap's scheduler-config.yaml as the API server stores it and a token of the
    scheduler's ServiceAccount."""
    api = plane.api
    resources.namespace_create(api=api, name=NAMESPACE)
    rendered = chart_render(
        values=["default"], set_values={"scheduler.enabled": "true"}, namespace=NAMESPACE
    )
    mine = [
        o
        for o in rendered
        if o["metadata"]["name"].startswith("schedweb-scheduler") and o["kind"] != "Deployment"
    ]
    assert sorted(o["kind"] for o in mine) == sorted(
        [
            "ServiceAccount",
            "ClusterRoleBinding",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ConfigMap",
        ]
    )
    stored = {}
    for obj in mine:
        stored[obj["kind"]] = _create(api, obj)
    config_text = stored["ConfigMap"]["data"]["scheduler-config.yaml"]
    token = api.post(
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/schedweb-scheduler/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )["status"]["token"]
    return config_text, token


def _as_run_here(config_text: str, *, stack, kubeconfig) -> dict:
    """The chart's configuration where this test runs it: only what the pod's surroundings
    provide is replaced - the Service's DNS name by the stack's loopback listener, the Secret's
    mount by the certificate files, in-cluster credentials by a kubeconfig with the token."""
    config = yaml.safe_load(config_text)
    [extender] = config["extenders"]
    assert extender["urlPrefix"] == "https://schedweb-extender.schedweb.svc:8443/extender/"
    extender["urlPrefix"] = f"{stack.extender_url}/extender/"
    for field, path in extender["tlsConfig"].items():
        assert path.startswith(MOUNT), field
        extender["tlsConfig"][field] = str(stack.tls_dir / SECRET_FILES[path.removeprefix(MOUNT)])
    assert "clientConnection" not in config  # in a pod: the ServiceAccount's token
    config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    return config


def _lease_holder(api, namespace: str, name: str) -> str:
    try:
        lease = api.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")
    except Exception:  # not created yet
        return ""
    return lease["spec"].get("holderIdentity") or ""


def test_the_charts_second_scheduler_schedules_through_the_extender_beside_the_default_one(
    plane, stack, nodes, policy
):
    config_text, token = _installed_scheduler(plane)
    config = _as_run_here(config_text, stack=stack, kubeconfig=plane.kubeconfig_for(token))
    assert config["leaderElection"] == {
        "leaderElect": True,
        "resourceLock": "leases",
        "resourceNamespace": NAMESPACE,
        "resourceName": "schedweb-scheduler",
    }
    assert [p["schedulerName"] for p in config["profiles"]] == ["schedweb"]
    default = {"leaderElection": {"leaderElect": True}}  # kube-system/kube-scheduler, admin
    with (
        plane.start_scheduler(default, leader_election=True),
        plane.start_scheduler(config, leader_election=True),
    ):
        api = plane.api
        default_holder = wait_until(
            lambda: _lease_holder(api, "kube-system", "kube-scheduler"),
            timeout=60,
            what="the default scheduler's lease",
        )
        ours = wait_until(
            lambda: _lease_holder(api, NAMESPACE, "schedweb-scheduler"),
            timeout=60,
            what="the second scheduler's lease",
        )
        assert default_holder != ours
        for i in range(3):
            create_pod(api, f"chart-pod-{i}")
        create_pod(api, "plain-pod", scheduler="default-scheduler")
        for i in range(3):
            node = resources.pod_wait_bound(api=api, name=f"chart-pod-{i}")
            assert node.startswith("chart-")  # the extender's filter, through mutual TLS
        assert resources.pod_wait_bound(api=api, name="plain-pod") in nodes
        # Each kept its lease all along.
        assert _lease_holder(api, "kube-system", "kube-scheduler") == default_holder
        assert _lease_holder(api, NAMESPACE, "schedweb-scheduler") == ours


def _filter(replica, names: list[str]) -> list[str]:
    body = {
        "Pod": {
            "metadata": {"name": "replica-check", "namespace": "default", "uid": "replica-uid"},
            "spec": {"schedulerName": "schedweb", "containers": [{"name": "c", "image": "i"}]},
        },
        "Nodes": None,
        "NodeNames": names,
    }
    status, answer = replica.request("POST", "/extender/filter", body)
    assert status == 200, answer
    return answer["NodeNames"]


def _all_serve(stack, replicas, version: int) -> None:
    """Waits until every worker process of each replica serves `version`."""
    for replica in replicas:
        stack.wait_serving("chart-steer", version, base=replica.url)


def test_two_extender_replicas_both_serve_a_publish_and_survive_each_other(stack, nodes, policy):
    first, second = stack.start_extender_replica(), stack.start_extender_replica()
    try:
        _all_serve(stack, [first, second], policy)
        changed = POLICY.replace('startsWith("chart-")', 'startsWith("chart-0")')
        version = stack.publish(changed, "replicas")
        _all_serve(stack, [first, second], version)
        assert _filter(first, nodes) == ["chart-00", "chart-01"]
        assert _filter(second, nodes) == ["chart-00", "chart-01"]

        first.process.stop(grace=0)  # killed
        assert first.request("GET", "/healthz")[0] == 0
        assert _filter(second, nodes) == ["chart-00", "chart-01"]
        version = stack.publish(POLICY.replace('"chart-"', '"chart-00"'), "after the kill")
        _all_serve(stack, [second], version)
        assert _filter(second, nodes) == ["chart-00"]
    finally:
        first.stop()
        second.stop()


def _tcp_queues(port: int, peer_port: int) -> tuple[int, int] | None:
    """(bytes sent but not acknowledged, bytes received but not read) of the loopback socket
    127.0.0.1:`port` connected to `peer_port`, from /proc/net/tcp; None if there is none."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        _slot, local, remote, _state, queues, *_ = line.split()
        if int(local.split(":")[1], 16) == port and int(remote.split(":")[1], 16) == peer_port:
            tx_queue, rx_queue = queues.split(":")
            return int(tx_queue, 16), int(rx_queue, 16)
    return None


def _read_by_server(server_port: int, client_port: int) -> bool:
    """True once the server process has read everything the client sent: the server's kernel
    acknowledged it all (the client's send queue is empty), and then the server's receive queue
    is empty."""
    client = _tcp_queues(client_port, server_port)
    if client is None or client[0] != 0:
        return False
    server = _tcp_queues(server_port, client_port)
    return server is not None and server[1] == 0


def test_the_extender_pods_probe_answers_only_with_a_client_certificate(stack):
    """schedweb/probe.py, the chart's exec probe, against the mutual-TLS listener."""
    from schedweb.probe import probe

    environ = {
        "SCHEDWEB_EXTENDER_PORT": str(stack.extender_port),
        "SCHEDWEB_PROBE_HOST": "localhost",  # a name of the server certificate and allowed
        "SCHEDWEB_EXTENDER_CLIENT_CA": str(stack.tls_dir / "ca.crt"),
        "SCHEDWEB_PROBE_CERT": str(stack.tls_dir / "probe.crt"),
        "SCHEDWEB_PROBE_KEY": str(stack.tls_dir / "probe.key"),
    }
    assert probe("/healthz", environ=environ) == ""
    assert probe("/readyz", environ=environ) == ""
    assert "HTTP 404" in probe("/nothing-here", environ=environ)
    no_cert = {k: v for k, v in environ.items() if not k.startswith("SCHEDWEB_PROBE_C")}
    assert probe("/healthz", environ=no_cert)  # refused in or right after the handshake
    wrong_name = {**environ, "SCHEDWEB_PROBE_HOST": "elsewhere.example"}
    assert "certificate" in probe("/healthz", environ=wrong_name).lower()


def test_an_extender_told_to_stop_answers_the_call_in_flight_before_it_exits(stack, nodes, policy):
    """Draining, as the chart's extender pods stop: SIGTERM to the listener's main process (what
    the kubelet sends after preStop) while a filter call is half sent; the call still gets its
    answer, then the process exits."""
    import json
    import os
    import signal
    import socket

    replica = stack.start_extender_replica()
    try:
        # every worker: whichever accepts the call below must answer with the policy
        stack.wait_workers(
            lambda health: "schedweb" in health.get("policies", {}),
            what="the policy served",
            base=replica.url,
        )
        body = json.dumps(
            {
                "Pod": {
                    "metadata": {"name": "drain", "namespace": "default", "uid": "drain-uid"},
                    "spec": {"schedulerName": "schedweb", "containers": [{"name": "c"}]},
                },
                "Nodes": None,
                "NodeNames": nodes,
            }
        ).encode()
        head = (
            f"POST /extender/filter HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
        context = stack.ssl_context(client_cert=True)
        with (
            socket.create_connection(("127.0.0.1", replica.port), timeout=20) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            tls.sendall(head + body[:10])
            # The worker must have read the headers before the signal (a connection without a
            # request is closed at shutdown, as it should be): wait until it has read every
            # byte sent, which the kernel shows.
            client_port = tls.getsockname()[1]
            wait_until(
                lambda: _read_by_server(replica.port, client_port),
                timeout=60,
                what="the worker to read the request's headers",
            )
            os.kill(replica.process.pid, signal.SIGTERM)  # the main process only, as the kubelet
            log = replica.process.log_path
            wait_until(
                lambda: log.read_text(errors="replace").count("Shutting down") >= stack.web_workers,
                timeout=60,
                what="both worker processes shutting down",
            )
            tls.sendall(body[10:])
            answer = b""
            while chunk := tls.recv(65536):
                answer += chunk
        status_line, _, rest = answer.partition(b"\r\n")
        assert status_line == b"HTTP/1.1 200 OK", answer[:300]
        verdict = json.loads(rest.split(b"\r\n\r\n", 1)[1])
        # The policy's verdict (earlier tests in this module narrow it to some chart- nodes).
        assert verdict["NodeNames"] and all(n.startswith("chart-") for n in verdict["NodeNames"])
        wait_until(lambda: replica.process.exit_code() is not None, timeout=60, what="the exit")
    finally:
        replica.stop()
