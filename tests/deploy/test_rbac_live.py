"""The chart's ServiceAccount and ClusterRole, created for real on the test kube-apiserver: the
product's own Kubernetes calls (the watcher's lists and watches, the requeue nudge's patch, bind)
succeed with a token the API server issues for that ServiceAccount (TokenRequest), and what the
role does not grant is refused by the API server (403)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from policies.cluster.live import KINDS, KubeError, LiveClient
from policies.cluster.store import SnapshotStore
from policies.schedulerconfig import extender_cluster_role
from tests.cluster.conftest import synced_reader, wait_until
from tests.deploy.chart import chart_render
from tests.harness.kubeapi import ApiError
from tests.harness.resources import (
    namespace_create,
    node_create,
    node_manifest,
    pod_create,
    pod_get,
    pod_manifest,
)

pytestmark = pytest.mark.cluster

RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")


class Installed:
    """The chart's RBAC objects of one release, created for real, and a token of its account."""

    def __init__(self, control_plane, *, bind: bool) -> None:
        self.release = f"rb{secrets.token_hex(3)}"
        self.namespace = self.release
        self.api = control_plane.api
        namespace_create(api=self.api, name=self.namespace)
        rendered = chart_render(
            values=["default"],
            set_values={"bind": str(bind).lower()},
            release=self.release,
            namespace=self.namespace,
        )
        self.objects = [o for o in rendered if o["kind"] in RBAC_KINDS]
        assert sorted(o["kind"] for o in self.objects) == sorted(RBAC_KINDS)
        self.role = next(o for o in self.objects if o["kind"] == "ClusterRole")
        account = next(o for o in self.objects if o["kind"] == "ServiceAccount")
        self.api.post(f"/api/v1/namespaces/{self.namespace}/serviceaccounts", account)
        self.api.post("/apis/rbac.authorization.k8s.io/v1/clusterroles", self.role)
        binding = next(o for o in self.objects if o["kind"] == "ClusterRoleBinding")
        self.api.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)
        name = account["metadata"]["name"]
        issued = self.api.post(
            f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{name}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 600},
            },
        )
        self.token = issued["status"]["token"]
        self.as_account = control_plane.api_for(self.token)
        self.client = LiveClient(kubeconfig=control_plane.kubeconfig_for(self.token))
        self.username = f"system:serviceaccount:{self.namespace}:{name}"

    def remove(self) -> None:
        base = "/apis/rbac.authorization.k8s.io/v1"
        for kind, path in (
            ("ClusterRoleBinding", "clusterrolebindings"),
            ("ClusterRole", "clusterroles"),
        ):
            obj = next(o for o in self.objects if o["kind"] == kind)
            self.api.delete(f"{base}/{path}/{obj['metadata']['name']}")


@pytest.fixture
def installed(control_plane) -> Iterator[callable]:
    made: list[Installed] = []

    def install(*, bind: bool) -> Installed:
        made.append(Installed(control_plane, bind=bind))
        return made[-1]

    yield install
    for release in made:
        release.remove()


def _pending_pod(api, *, namespace: str, name: str) -> dict:
    return pod_create(
        api=api, manifest=pod_manifest(name=name, namespace=namespace, scheduler_name="schedweb")
    )


def test_the_charts_cluster_role_is_the_one_schedulerconfig_rbac_prints():
    """One generator: the chart's role and `manage.py schedulerconfig --rbac` agree, with bind
    and queue (PriorityClasses and Workloads) each on and off."""
    for bind in (False, True):
        for queue in (False, True):
            rendered = chart_render(
                values=["default"],
                set_values={"bind": str(bind).lower(), "queue.enabled": str(queue).lower()},
            )
            chart = [o for o in rendered if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
            for obj in chart:
                del obj["metadata"]["labels"]
            assert chart == extender_cluster_role(bind=bind, queue=queue)


def test_the_watcher_and_the_requeue_nudge_run_with_the_charts_account_and_nothing_more(
    control_plane, installed, live_redis, cluster_name, names, run_watcher
):
    release = installed(bind=False)
    api = control_plane.api

    # The role is effective once the authorizer's informers have it: wait for that, not a time.
    def nodes_listed() -> bool:
        try:
            return release.client.list("nodes") is not None
        except KubeError as exc:
            assert exc.http_status == 403  # the role is not in force yet; anything else fails
            return False

    wait_until(nodes_listed, what="RBAC in force")
    for kind in KINDS:  # every list the watcher makes
        release.client.list(kind)

    node = names("node")
    node_create(api=api, manifest=node_manifest(name=node))
    store = SnapshotStore(cluster_name, client=live_redis)
    running = run_watcher(client=release.client, store=store)
    reader = synced_reader(store)

    def node_seen() -> bool:
        reader.refresh()
        return reader.current.state.node(node) is not None

    wait_until(node_seen, what="the node in the account's snapshot")
    assert running.watcher is not None

    pod = names("pod")
    _pending_pod(api, namespace=release.namespace, name=pod)
    release.client.annotate_pod(
        namespace=release.namespace, name=pod, annotations={"schedweb.io/requeue": "1"}
    )
    got = pod_get(api=api, name=pod, namespace=release.namespace)
    assert got["metadata"]["annotations"]["schedweb.io/requeue"] == "1"

    # Not granted: deleting a pod, binding one (bind is off), writing nodes.
    with pytest.raises(ApiError) as refused:
        release.as_account.delete(f"/api/v1/namespaces/{release.namespace}/pods/{pod}")
    assert refused.value.status == 403 and release.username in refused.value.message
    with pytest.raises(KubeError) as refused_bind:
        release.client.bind(
            namespace=release.namespace, name=pod, uid=got["metadata"]["uid"], node=node
        )
    assert refused_bind.value.http_status == 403
    # the message names what was refused, not the watcher's list-and-watch needs
    assert 'cannot create resource "pods/binding"' in str(refused_bind.value)
    assert "list and watch" not in str(refused_bind.value)
    with pytest.raises(ApiError) as refused_node:
        release.as_account.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {"x": "y"}}})
    assert refused_node.value.status == 403
    assert pod_get(api=api, name=pod, namespace=release.namespace)["spec"].get("nodeName") is None


def test_bind_runs_with_the_charts_account_when_bind_is_on(control_plane, installed, names):
    release = installed(bind=True)
    api = control_plane.api
    rules = {r["resources"][0]: r["verbs"] for r in release.role["rules"] if r["apiGroups"] == [""]}
    assert rules["pods/binding"] == ["create"]
    node, pod = names("node"), names("pod")
    node_create(api=api, manifest=node_manifest(name=node))
    created = _pending_pod(api, namespace=release.namespace, name=pod)

    def bound() -> bool:
        try:
            release.client.bind(
                namespace=release.namespace, name=pod, uid=created["metadata"]["uid"], node=node
            )
        except KubeError as exc:
            assert exc.http_status == 403  # the role is not in force yet; anything else fails
            return False
        return True

    wait_until(bound, what="a bind with the account's token")
    assert pod_get(api=api, name=pod, namespace=release.namespace)["spec"]["nodeName"] == node
    # get pods is granted with bind (a 409 reads the pod); deleting still is not.
    assert release.client.pod_node(namespace=release.namespace, name=pod) == node
    with pytest.raises(ApiError) as refused:
        release.as_account.delete(f"/api/v1/namespaces/{release.namespace}/pods/{pod}")
    assert refused.value.status == 403
