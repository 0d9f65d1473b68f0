"""The chart's identities, created for real on the test kube-apiserver (v1.35.8): each component's
ServiceAccount, its ClusterRole and binding, and the ValidatingAdmissionPolicies that bound what
RBAC cannot narrow. With a token the API server issues for each account (TokenRequest), the
product's own calls succeed (the watcher's lists and watches, the requeue nudge, the queue
classes, bind) and everything else is refused: 403 from RBAC, or from the admission policy for a
worker patch that changes more than schedweb's annotation, or a PriorityClass that is not
schedweb's queue class."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from policies.admission.classes import class_manifest
from policies.cluster.live import KINDS, KubeError, LiveClient
from policies.cluster.store import SnapshotStore
from policies.extender.requeue import ANNOTATION as REQUEUE_ANNOTATION
from policies.schedulerconfig import REQUEUE_ANNOTATION as GENERATED_ANNOTATION
from policies.schedulerconfig import schedweb_rbac
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

COMPONENTS = ("web", "extender", "worker", "beat", "migrate")
POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
PATHS = {
    "ServiceAccount": None,
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "ValidatingAdmissionPolicy": (
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
    ),
    "ValidatingAdmissionPolicyBinding": (
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
    ),
}


class Installed:
    """The chart's identity objects of one release, created for real, with a token for each
    component's account."""

    def __init__(self, control_plane, *, bind: bool, queue: bool) -> None:
        self.release = f"rb{secrets.token_hex(3)}"
        self.namespace = self.release
        self.api = control_plane.api
        namespace_create(api=self.api, name=self.namespace)
        rendered = chart_render(
            values=["default"],
            set_values={"bind": str(bind).lower(), "queue.enabled": str(queue).lower()},
            release=self.release,
            namespace=self.namespace,
        )
        self.objects = [o for o in rendered if o["kind"] in PATHS]
        self.created: list[tuple[str, str]] = []
        for obj in self.objects:
            if obj["kind"] == "ServiceAccount":
                self.api.post(f"/api/v1/namespaces/{self.namespace}/serviceaccounts", obj)
            else:
                self.api.post(PATHS[obj["kind"]], obj)
                self.created.append((PATHS[obj["kind"]], obj["metadata"]["name"]))
        self.fullname = f"{self.release}-schedweb"
        self.as_: dict = {}
        self.clients: dict = {}
        self.usernames: dict = {}
        for component in COMPONENTS:
            account = f"{self.fullname}-{component}"
            issued = self.api.post(
                f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{account}/token",
                {
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenRequest",
                    "spec": {"expirationSeconds": 600},
                },
            )
            token = issued["status"]["token"]
            self.as_[component] = control_plane.api_for(token)
            self.clients[component] = LiveClient(kubeconfig=control_plane.kubeconfig_for(token))
            self.usernames[component] = f"system:serviceaccount:{self.namespace}:{account}"

    def named(self, kind: str) -> list[dict]:
        return [o for o in self.objects if o["kind"] == kind]

    def remove(self) -> None:
        for path, name in reversed(self.created):
            try:
                self.api.delete(f"{path}/{name}")
            except ApiError as err:
                if err.status != 404:
                    raise


@pytest.fixture
def installed(control_plane) -> Iterator[callable]:
    made: list[Installed] = []

    def install(*, bind: bool = False, queue: bool = False) -> Installed:
        made.append(Installed(control_plane, bind=bind, queue=queue))
        return made[-1]

    yield install
    for release in made:
        release.remove()


def _refused(call) -> ApiError:
    """The ApiError `call()` raises: a test fails if it succeeds."""
    with pytest.raises(ApiError) as refused:
        call()
    return refused.value


def _forbidden(call, username: str) -> None:
    err = _refused(call)
    assert err.status == 403 and username in err.message, err


def _rbac_in_force(client: LiveClient, kind: str = "nodes") -> None:
    """Waits until the authorizer's informers have the role (a condition, not a time)."""

    def listed() -> bool:
        try:
            return client.list(kind) is not None
        except KubeError as exc:
            assert exc.http_status == 403  # not in force yet; anything else fails
            return False

    wait_until(listed, what="RBAC in force")


def _image_patch(image: str) -> dict:
    return {"spec": {"containers": [{"name": "main", "image": image}]}}


def _policy_in_force(release: Installed, pod: str) -> None:
    """Waits until the admission policy refuses the worker's image change of `pod` (the policy
    is effective once the API server's informers have it and its binding)."""
    worker = release.as_["worker"]
    path = f"/api/v1/namespaces/{release.namespace}/pods/{pod}"
    attempt = iter(range(10**6))

    def refused() -> bool:
        try:
            worker.patch(
                path,
                _image_patch(f"registry.k8s.io/pause:3.{next(attempt)}"),
                patch_type="strategic",
            )
        except ApiError as err:
            assert err.status == 403 and "schedweb's worker may change only" in err.message, err
            return True
        return False

    wait_until(refused, timeout=120, what="the admission policy in force")


def test_the_admission_policy_allows_the_annotation_the_requeue_nudge_writes():
    """The annotation the worker writes (policies/extender/requeue.py) is the one the chart's
    policy allows and schedulerconfig names."""
    assert GENERATED_ANNOTATION == REQUEUE_ANNOTATION
    [policy] = [
        o
        for o in chart_render(values=["default"])
        if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"].endswith("-pods")
    ]
    allowed = [v["expression"] for v in policy["spec"]["validations"]]
    assert any(f"k == '{REQUEUE_ANNOTATION}'" in e for e in allowed)


def test_the_charts_roles_are_the_ones_schedulerconfig_rbac_prints():
    """One generator: the chart's roles and `manage.py schedulerconfig --rbac` agree, with bind
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

            def key(obj):
                return obj["kind"], obj["metadata"]["name"]

            assert sorted(chart, key=key) == sorted(schedweb_rbac(bind=bind, queue=queue), key=key)


def test_the_worker_watches_and_nudges_pods_and_may_do_nothing_else(
    control_plane, installed, live_redis, cluster_name, names, run_watcher
):
    release = installed()
    api, worker, who = control_plane.api, release.as_["worker"], release.usernames["worker"]
    client = release.clients["worker"]
    _rbac_in_force(client)
    for kind in KINDS:  # every list the watcher makes
        client.list(kind)

    node = names("node")
    node_create(api=api, manifest=node_manifest(name=node))
    store = SnapshotStore(cluster_name, client=live_redis)
    running = run_watcher(client=client, store=store)
    reader = synced_reader(store)

    def node_seen() -> bool:
        reader.refresh()
        return reader.current.state.node(node) is not None

    wait_until(node_seen, what="the node in the worker's snapshot")
    assert running.watcher is not None

    pod, probe = names("pod"), names("probe")
    for name in (pod, probe):
        pod_create(
            api=api,
            manifest=pod_manifest(
                name=name, namespace=release.namespace, scheduler_name="schedweb"
            ),
        )
    _policy_in_force(release, probe)
    path = f"/api/v1/namespaces/{release.namespace}/pods/{pod}"

    # The requeue nudge, as the product makes it (policies/extender/requeue.py), and again.
    for stamp in ("1700000000.000", "1700000005.000"):
        client.annotate_pod(
            namespace=release.namespace, name=pod, annotations={REQUEUE_ANNOTATION: stamp}
        )
        assert (
            pod_get(api=api, name=pod, namespace=release.namespace)["metadata"]["annotations"][
                REQUEUE_ANNOTATION
            ]
            == stamp
        )

    # The admission policy: nothing of the pod but that annotation, in the worker's hands.
    for patch, patch_type in (
        (_image_patch("attacker.example/miner:1"), "strategic"),
        ({"spec": {"activeDeadlineSeconds": 1}}, "merge"),
        (  # tolerate everything: what a pod may gain after creation, if the worker could
            [{"op": "add", "path": "/spec/tolerations/-", "value": {"operator": "Exists"}}],
            "json",
        ),
        ({"metadata": {"labels": {"app": "other"}}}, "merge"),
        ({"metadata": {"annotations": {"example.com/owner": "attacker"}}}, "merge"),
        ({"metadata": {"annotations": {REQUEUE_ANNOTATION: "x" * 65}}}, "merge"),
        ({"metadata": {"finalizers": ["example.com/hold"]}}, "merge"),
    ):
        err = _refused(lambda p=patch, t=patch_type: worker.patch(path, p, patch_type=t))
        assert err.status == 403 and "schedweb" in err.message, (patch, err)
    got = pod_get(api=api, name=pod, namespace=release.namespace)
    assert got["spec"]["containers"][0]["image"] == "registry.k8s.io/pause:3.10"
    assert "example.com/owner" not in got["metadata"].get("annotations", {})
    # ... while another user's changes pass untouched (the policy matches the worker only)
    api.patch(path, {"metadata": {"labels": {"app": "mine"}}})

    # Not granted at all: deleting a pod, binding, writing nodes, reading secrets, PriorityClasses.
    _forbidden(lambda: worker.delete(path), who)
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
               "target": {"apiVersion": "v1", "kind": "Node", "name": node}}  # fmt: skip
    _forbidden(lambda: worker.post(f"{path}/binding", binding), who)
    _forbidden(
        lambda: worker.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {"x": "y"}}}), who
    )
    _forbidden(lambda: worker.get(f"/api/v1/namespaces/{release.namespace}/secrets"), who)
    _forbidden(lambda: worker.get("/apis/scheduling.k8s.io/v1/priorityclasses"), who)  # queue off
    assert pod_get(api=api, name=pod, namespace=release.namespace)["spec"].get("nodeName") is None


def test_web_beat_and_the_migrations_can_do_nothing_and_the_extender_nothing_without_bind(
    control_plane, installed, names
):
    release = installed()
    api = control_plane.api
    pod = names("pod")
    pod_create(api=api, manifest=pod_manifest(name=pod, namespace=release.namespace))
    path = f"/api/v1/namespaces/{release.namespace}/pods/{pod}"
    _rbac_in_force(release.clients["worker"])  # the bindings are in the authorizer's cache
    for component in ("web", "beat", "migrate", "extender"):
        as_, who = release.as_[component], release.usernames[component]
        for call in (
            lambda a=as_: a.get("/api/v1/nodes"),
            lambda a=as_: a.get("/api/v1/pods"),
            lambda a=as_: a.get(path),
            lambda a=as_: a.patch(path, {"metadata": {"annotations": {REQUEUE_ANNOTATION: "1"}}}),
            lambda a=as_: a.get(f"/api/v1/namespaces/{release.namespace}/secrets"),
            lambda a=as_: a.get("/apis/scheduling.k8s.io/v1/priorityclasses"),
        ):
            _forbidden(call, who)


def test_the_extender_binds_when_bind_is_on_and_may_do_nothing_else(
    control_plane, installed, names
):
    release = installed(bind=True)
    api, extender, who = (
        control_plane.api,
        release.clients["extender"],
        release.usernames["extender"],
    )
    node, pod = names("node"), names("pod")
    node_create(api=api, manifest=node_manifest(name=node))
    created = pod_create(
        api=api,
        manifest=pod_manifest(name=pod, namespace=release.namespace, scheduler_name="schedweb"),
    )

    def bound() -> bool:
        try:
            extender.bind(
                namespace=release.namespace, name=pod, uid=created["metadata"]["uid"], node=node
            )
        except KubeError as exc:
            assert exc.http_status == 403  # the role is not in force yet; anything else fails
            return False
        return True

    wait_until(bound, what="a bind with the extender's token")
    assert pod_get(api=api, name=pod, namespace=release.namespace)["spec"]["nodeName"] == node
    # get pods is granted with bind (a 409 reads the pod); nothing else is.
    assert extender.pod_node(namespace=release.namespace, name=pod) == node
    as_extender = release.as_["extender"]
    path = f"/api/v1/namespaces/{release.namespace}/pods/{pod}"
    _forbidden(lambda: as_extender.delete(path), who)
    _forbidden(lambda: as_extender.get("/api/v1/pods"), who)
    _forbidden(lambda: as_extender.get("/api/v1/nodes"), who)
    _forbidden(lambda: as_extender.patch(path, {"metadata": {"labels": {"x": "y"}}}), who)
    # and the worker has no bind of its own
    with pytest.raises(KubeError) as refused_bind:
        release.clients["worker"].bind(
            namespace=release.namespace, name=pod, uid=created["metadata"]["uid"], node=node
        )
    assert refused_bind.value.http_status == 403


def _queue_class(name: str, value: int, **fields) -> dict:
    """A PriorityClass as the worker makes it (class_manifest), renamed, fields replaced."""
    manifest = class_manifest(value) | fields
    manifest["metadata"] = {**manifest["metadata"], "name": name}
    return manifest


def test_the_worker_creates_only_schedwebs_queue_classes(control_plane, installed):
    """With queue on, the worker lists and creates PriorityClasses; the admission policy lets
    only schedweb-queue-<key> through, never globalDefault, never preempting, and within
    queue.priorityRange (0..1000 by default)."""
    release = installed(queue=True)
    worker, who = release.as_["worker"], release.usernames["worker"]
    client = release.clients["worker"]
    _rbac_in_force(client)
    classes = "/apis/scheduling.k8s.io/v1/priorityclasses"
    tag = secrets.token_hex(3)
    made: list[str] = []

    def attempt(manifest) -> ApiError | None:
        try:
            worker.post(classes, manifest)
        except ApiError as err:
            return err
        made.append(manifest["metadata"]["name"])
        return None

    # In force once an out-of-range class is refused by it (harmless if made before: removed).
    def policy_refuses() -> bool:
        err = attempt(_queue_class(f"schedweb-queue-probe-{tag}", 5000))
        if err is None:
            control_plane.api.delete(f"{classes}/{made.pop()}")
            return False
        assert err.status == 403 and "valued from 0 to 1000" in err.message, err
        return True

    wait_until(policy_refuses, timeout=120, what="the scheduling policy in force")
    try:
        for manifest, message in (
            (_queue_class(f"schedweb-queue-a-{tag}", 5, globalDefault=True), "globalDefault"),
            (
                _queue_class(f"schedweb-queue-b-{tag}", 5, preemptionPolicy="PreemptLowerPriority"),
                "preemptionPolicy Never",
            ),
            (_queue_class(f"schedweb-queue-c-{tag}", 1001), "valued from 0 to 1000"),
            (_queue_class(f"schedweb-queue-d-{tag}", -1), "valued from 0 to 1000"),
            (_queue_class(f"critical-{tag}", 5), "named schedweb-queue-"),
        ):
            err = attempt(manifest)
            assert err is not None and err.status == 403 and message in err.message, (manifest, err)
        assert attempt(_queue_class(f"schedweb-queue-5-{tag}", 5)) is None
        assert f"schedweb-queue-5-{tag}" in client.priority_class_names()
        _forbidden(lambda: worker.delete(f"{classes}/schedweb-queue-5-{tag}"), who)
    finally:
        for name in made:
            control_plane.api.delete(f"{classes}/{name}")
