"""The Helm chart (deploy/helm/schedweb/): lint, render with each value set, every object
accepted by the real kube-apiserver (server-side dry run), no privileged settings."""

from __future__ import annotations

import pytest

from tests.deploy.chart import (
    VALUE_SETS,
    chart_render,
    dry_run_create,
    helm,
    pod_specs,
)
from tests.harness.kubeapi import ApiError

pytestmark = pytest.mark.cluster

SETS = sorted(p.name.removesuffix("-values.yaml") for p in VALUE_SETS.glob("*-values.yaml"))


def namespace_ensure(api, name: str, labels: dict[str, str] | None = None) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    if labels:
        body["metadata"]["labels"] = labels
    try:
        api.post("/api/v1/namespaces", body)
    except ApiError as err:
        if err.status != 409:
            raise


def test_the_value_sets_cover_defaults_external_services_a_second_scheduler_bind_and_queue():
    assert SETS == ["bind", "default", "external", "queue", "scheduler"]


@pytest.mark.parametrize("value_set", SETS)
def test_helm_lint_is_clean_with_each_value_set(value_set):
    done = helm(
        "lint",
        "--strict",
        str(VALUE_SETS.parent),
        "-f",
        str(VALUE_SETS / f"{value_set}-values.yaml"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[ERROR]" not in done.stdout and "[WARNING]" not in done.stdout, done.stdout


def test_without_a_database_url_the_chart_refuses_to_render_and_says_which_value():
    done = helm("template", "schedweb", str(VALUE_SETS.parent))
    assert done.returncode != 0
    assert "database.url is required" in done.stderr


@pytest.mark.parametrize("value_set", SETS)
def test_every_object_of_each_value_set_is_accepted_by_the_api_server(control_plane, value_set):
    api = control_plane.api
    namespace_ensure(api, "schedweb")
    objects = chart_render(values=[value_set])
    refused = []
    for obj in objects:
        try:
            dry_run_create(api, obj)
        except ApiError as err:
            refused.append(f"{obj['kind']}/{obj['metadata']['name']}: {err}")
    assert refused == []
    kinds = {obj["kind"] for obj in objects}
    assert {"Deployment", "Service", "PodDisruptionBudget", "Job", "ClusterRole"} <= kinds
    if value_set in ("scheduler", "bind"):
        assert "ConfigMap" in kinds  # the second scheduler's KubeSchedulerConfiguration
    if value_set == "queue":
        assert "MutatingWebhookConfiguration" in kinds  # the queue webhook, with its CA bundle


def _components(objects):
    return {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] in ("Deployment", "Job")}


def test_the_defaults_run_web_and_extender_twice_beat_once_and_migrations_as_a_hook():
    deployments = _components(chart_render(values=["default"]))
    assert deployments["schedweb-web"]["spec"]["replicas"] >= 2
    assert deployments["schedweb-extender"]["spec"]["replicas"] >= 2
    beat = deployments["schedweb-beat"]["spec"]
    assert beat["replicas"] == 1 and beat["strategy"] == {"type": "Recreate"}
    hook = deployments["schedweb-migrate"]["metadata"]["annotations"]["helm.sh/hook"]
    assert hook == "pre-install,pre-upgrade"
    extender = deployments["schedweb-extender"]["spec"]["template"]["spec"]
    container = extender["containers"][0]
    assert container["readinessProbe"]["exec"]["command"][-1] == "/readyz"
    assert container["livenessProbe"]["exec"]["command"][-1] == "/healthz"
    assert container["lifecycle"]["preStop"] == {"sleep": {"seconds": 5}}
    assert extender["terminationGracePeriodSeconds"] > 5
    assert container["resources"]["requests"]
    assert extender["affinity"]["podAntiAffinity"]


def test_the_defaults_store_no_data_in_an_empty_dir():
    """/tmp is the only emptyDir (bounded); PostgreSQL is external, Redis keeps nothing on disk."""
    for where, spec in pod_specs(chart_render(values=["default"])):
        for volume in spec.get("volumes", []):
            if "emptyDir" in volume:
                assert volume["name"] == "tmp" and volume["emptyDir"]["sizeLimit"], where


@pytest.mark.parametrize("value_set", ["default", "scheduler"])
def test_no_container_has_privileged_settings(value_set):
    """Non-root, read-only root filesystem, no privilege escalation, every capability dropped,
    no host namespaces or host paths."""
    problems = []
    for where, spec in pod_specs(chart_render(values=[value_set])):
        pod = spec.get("securityContext", {})
        for key in ("hostNetwork", "hostPID", "hostIPC"):
            if spec.get(key):
                problems.append(f"{where}: {key}")
        if any("hostPath" in v for v in spec.get("volumes", [])):
            problems.append(f"{where}: hostPath")
        for container in spec["containers"] + spec.get("initContainers", []):
            ctx = container.get("securityContext", {})
            name = f"{where}/{container['name']}"
            if not (ctx.get("runAsNonRoot") or pod.get("runAsNonRoot")):
                problems.append(f"{name}: may run as root")
            if ctx.get("runAsUser", pod.get("runAsUser")) == 0:
                problems.append(f"{name}: runAsUser 0")
            if ctx.get("readOnlyRootFilesystem") is not True:
                problems.append(f"{name}: writable root filesystem")
            if ctx.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{name}: privilege escalation allowed")
            if ctx.get("privileged"):
                problems.append(f"{name}: privileged")
            if ctx.get("capabilities", {}).get("drop") != ["ALL"]:
                problems.append(f"{name}: capabilities not all dropped")
            if ctx.get("capabilities", {}).get("add"):
                problems.append(f"{name}: capabilities added")
    assert problems == []


@pytest.mark.parametrize("value_set", ["default", "scheduler"])
def test_every_pod_passes_the_restricted_pod_security_standard_of_the_api_server(
    control_plane, value_set
):
    """The API server's own PodSecurity admission, enforcing `restricted`, admits a Pod made
    from each pod template (dry run)."""
    api = control_plane.api
    namespace = "schedweb-restricted"
    namespace_ensure(api, namespace, {"pod-security.kubernetes.io/enforce": "restricted"})
    refused = []
    for where, spec in pod_specs(chart_render(values=[value_set])):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probe", "namespace": namespace},
            "spec": spec,
        }
        try:
            dry_run_create(api, pod)
        except ApiError as err:
            refused.append(f"{where}: {err}")
    assert refused == []


def _env(container) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


@pytest.mark.django_db
def test_the_web_probes_reach_the_health_views_through_the_charts_production_settings(
    settings, client
):
    """The kubelet's GET with the probe's headers passes the host check and is not redirected
    to HTTPS under the settings the chart gives the web pods."""
    web = next(
        o
        for o in chart_render(values=["default"])
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "schedweb-web"
    )
    container = web["spec"]["template"]["spec"]["containers"][0]
    env = _env(container)
    assert (env["SCHEDWEB_HTTPS"], env["SCHEDWEB_BEHIND_PROXY"]) == ("1", "1")
    settings.ALLOWED_HOSTS = env["SCHEDWEB_ALLOWED_HOSTS"].split(",")
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    for probe in ("livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        headers = {h["name"]: h["value"] for h in get["httpHeaders"]}
        response = client.get(
            get["path"],
            HTTP_HOST=headers["Host"],
            HTTP_X_FORWARDED_PROTO=headers["X-Forwarded-Proto"],
        )
        assert response.status_code in (200, 503), (probe, response.status_code)  # answered
        bare = client.get(get["path"], HTTP_HOST=headers["Host"])
        assert bare.status_code == 301  # without the header: the redirect the header avoids
    assert client.get("/healthz", HTTP_HOST="10.1.2.3:8000").status_code == 400


def _named(objects, kind: str, name: str):
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def test_only_the_second_scheduler_and_the_listed_peers_may_reach_the_extender_port():
    alone = _named(chart_render(values=["default"]), "NetworkPolicy", "schedweb-extender")
    assert alone["spec"]["ingress"] == []  # no scheduler, no peer: nothing reaches it
    peer = {"ipBlock": {"cidr": "192.0.2.0/28"}}
    policy = _named(
        chart_render(
            values=["scheduler"],
            set_values={"networkPolicy.extenderFrom[0].ipBlock.cidr": "192.0.2.0/28"},
        ),
        "NetworkPolicy",
        "schedweb-extender",
    )
    [rule] = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8443}]
    scheduler = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "schedweb"}},
        "podSelector": {
            "matchLabels": {
                "app.kubernetes.io/name": "schedweb-scheduler",
                "app.kubernetes.io/part-of": "schedweb",
            }
        },
    }
    assert rule["from"] == [scheduler, peer]
    deployment = _named(chart_render(values=["scheduler"]), "Deployment", "schedweb-scheduler")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert scheduler["podSelector"]["matchLabels"].items() <= labels.items()


def test_cert_manager_issues_the_server_probe_and_scheduler_certificates():
    objects = chart_render(
        values=["scheduler"],
        set_values={
            "tls.certManager.enabled": "true",
            "tls.certManager.issuerRef.name": "ca-issuer",
        },
    )
    certificates = {o["spec"]["secretName"]: o for o in objects if o["kind"] == "Certificate"}
    assert set(certificates) == {
        "schedweb-extender-tls",
        "schedweb-extender-probe",
        "schedweb-scheduler-extender-tls",
    }
    server = certificates["schedweb-extender-tls"]["spec"]
    assert "schedweb-extender.schedweb.svc" in server["dnsNames"]
    assert server["usages"][0] == "server auth"
    for client in ("schedweb-extender-probe", "schedweb-scheduler-extender-tls"):
        assert certificates[client]["spec"]["usages"][0] == "client auth"
        assert certificates[client]["spec"]["issuerRef"]["name"] == "ca-issuer"
    # The Secrets the pods mount are the ones issued.
    extender = _named(objects, "Deployment", "schedweb-extender")["spec"]["template"]["spec"]
    mounted = {v["secret"]["secretName"] for v in extender["volumes"] if "secret" in v}
    assert mounted == {"schedweb-extender-tls", "schedweb-extender-probe"}
    done = helm(
        "template",
        "schedweb",
        str(VALUE_SETS.parent),
        "-f",
        str(VALUE_SETS / "default-values.yaml"),
        "--set",
        "tls.certManager.enabled=true",
    )
    assert done.returncode != 0 and "tls.certManager.issuerRef.name is required" in done.stderr
