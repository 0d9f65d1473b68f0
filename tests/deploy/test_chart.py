"""The Helm chart (deploy/helm/schedweb/): lint, render with each value set, every object
accepted by the real kube-apiserver (server-side dry run), no privileged settings, and what a
security review and a first day ask of it: one identity per component, Secrets that are not
hooks and roll the pods, pinned images, probes, scheduling fields, the values' schema."""

from __future__ import annotations

import re

import pytest

from tests.deploy.chart import (
    CHART,
    VALUE_SETS,
    chart_render,
    crds_ensure,
    dry_run_create,
    helm,
    pod_specs,
)
from tests.harness.kubeapi import ApiError

pytestmark = pytest.mark.cluster

SETS = sorted(p.name.removesuffix("-values.yaml") for p in VALUE_SETS.glob("*-values.yaml"))
COMPONENTS = ("web", "extender", "worker", "beat", "migrate")


def namespace_ensure(api, name: str, labels: dict[str, str] | None = None) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    if labels:
        body["metadata"]["labels"] = labels
    try:
        api.post("/api/v1/namespaces", body)
    except ApiError as err:
        if err.status != 409:
            raise


def test_the_value_sets_cover_defaults_external_services_a_scheduler_bind_queue_exposure_tuning():
    assert SETS == ["bind", "default", "exposed", "external", "queue", "scheduler", "tuned"]


@pytest.mark.parametrize("value_set", SETS)
def test_helm_lint_is_clean_with_each_value_set(value_set):
    done = helm("lint", "--strict", str(CHART), "-f", str(VALUE_SETS / f"{value_set}-values.yaml"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[ERROR]" not in done.stdout and "[WARNING]" not in done.stdout, done.stdout


def test_without_a_database_url_the_chart_refuses_to_render_and_says_which_value():
    done = helm("template", "schedweb", str(CHART))
    assert done.returncode != 0
    assert "database.url is required" in done.stderr


@pytest.mark.parametrize("value_set", SETS)
def test_every_object_of_each_value_set_is_accepted_by_the_api_server(control_plane, value_set):
    api = control_plane.api
    crds_ensure(api)  # cert-manager, Prometheus Operator and Gateway API kinds (stand-ins)
    objects = chart_render(values=[value_set])
    for namespace in {o["metadata"].get("namespace") for o in objects} - {None}:
        namespace_ensure(api, namespace)
    refused = []
    for obj in objects:
        try:
            dry_run_create(api, obj)
        except ApiError as err:
            refused.append(f"{obj['kind']}/{obj['metadata']['name']}: {err}")
    assert refused == []
    kinds = {obj["kind"] for obj in objects}
    assert {"Deployment", "Service", "Job", "ClusterRole", "ValidatingAdmissionPolicy"} <= kinds
    if value_set in ("scheduler", "bind", "tuned"):
        assert "ConfigMap" in kinds  # the second scheduler's KubeSchedulerConfiguration
    if value_set == "queue":
        assert "MutatingWebhookConfiguration" in kinds  # the queue webhook, with its CA bundle
    if value_set == "exposed":
        assert {"Ingress", "HTTPRoute", "ServiceMonitor", "Certificate"} <= kinds


# --- the values' schema ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        # misspelt keys
        ("extender.replica=5", "at '/extender': additional properties 'replica' not allowed"),
        ("web.resouces.limits.memory=1Gi", "at '/web': additional properties 'resouces'"),
        ("imagePullSecret[0].name=x", "additional properties 'imagePullSecret' not allowed"),
        ("worker.livness.maxAgeSeconds=60", "at '/worker': additional properties 'livness'"),
        ("queue.priorityRange.maximum=5", "at '/queue/priorityRange': additional properties"),
        # wrong types and values
        ("web.replicas=two", "at '/web/replicas': got string, want integer"),
        ("bind=yes", "at '/bind': got string, want boolean"),
        ("sizing.nodes=0", "at '/sizing/nodes'"),
        ("antiAffinity=sometimes", "at '/antiAffinity'"),
        ("zoneSpread=Always", "at '/zoneSpread'"),
        ("image.digest=latest", "at '/image/digest'"),
        ("database.url=mysql://x/y", "at '/database/url'"),
        ("worker.concurrency=1", "at '/worker/concurrency'"),
        ("extender.port=70000", "at '/extender/port'"),
        ("web.resources.limits.memory=lots", "at '/web/resources/limits/memory'"),
    ],
)
def test_the_schema_refuses_misspelt_keys_and_wrong_types_naming_them(setting, message):
    done = helm(
        "template", "schedweb", str(CHART), "-f", str(VALUE_SETS / "default-values.yaml"),
        "--set", setting,
    )  # fmt: skip
    assert done.returncode != 0
    assert message in done.stderr, done.stderr


def test_the_schema_is_strict_at_every_level_of_the_values():
    """Every object of the schema that describes the chart's own keys forbids others (only
    Kubernetes' own shapes - resources' quantities, affinity, tolerations, maps of labels -
    are left open)."""
    import json

    schema = json.loads((CHART / "values.schema.json").read_text())
    open_ones = []

    def walk(node, where):
        if not isinstance(node, dict):
            return
        is_ours = node.get("type") == "object" and "properties" in node
        if is_ours and node.get("additionalProperties") is not False:
            open_ones.append(where)
        for key, child in node.get("properties", {}).items():
            walk(child, f"{where}.{key}")
        for name, child in node.get("definitions", {}).items():
            walk(child, f"#{name}")

    walk(schema, "")
    assert open_ones == []


# --- identities -----------------------------------------------------------------------------


def _named(objects, kind: str, name: str):
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def _component_specs(objects) -> dict[str, dict]:
    """component -> its pod spec (Deployments and the Job)."""
    found = {}
    for obj in objects:
        if obj["kind"] in ("Deployment", "Job"):
            labels = obj["spec"]["template"]["metadata"]["labels"]
            if "app.kubernetes.io/component" in labels:
                found[labels["app.kubernetes.io/component"]] = obj["spec"]["template"]["spec"]
    return found


@pytest.mark.parametrize("bind", [False, True])
def test_each_component_has_its_own_account_and_a_token_only_if_it_calls_the_api(bind):
    objects = chart_render(values=["default"], set_values={"bind": str(bind).lower()})
    specs = _component_specs(objects)
    accounts = {c: specs[c]["serviceAccountName"] for c in COMPONENTS}
    assert accounts == {c: f"schedweb-{c}" for c in COMPONENTS}
    made = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ServiceAccount"}
    assert set(accounts.values()) <= set(made)
    assert all(a["automountServiceAccountToken"] is False for a in made.values())
    tokens = {c: specs[c]["automountServiceAccountToken"] for c in COMPONENTS}
    assert tokens == {
        "web": False,
        "extender": bind,
        "worker": True,
        "beat": False,
        "migrate": False,
    }
    bound = {
        o["subjects"][0]["name"]: o["roleRef"]["name"]
        for o in objects
        if o["kind"] == "ClusterRoleBinding"
    }
    assert bound == {"schedweb-worker": "schedweb-worker"} | (
        {"schedweb-extender": "schedweb-extender"} if bind else {}
    )


def test_account_names_and_annotations_follow_the_values():
    objects = chart_render(values=["tuned"])
    specs = _component_specs(objects)
    assert specs["worker"]["serviceAccountName"] == "sched-watcher"
    assert specs["web"]["serviceAccountName"] == "sched-web"
    web = _named(objects, "ServiceAccount", "sched-web")
    assert web["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/schedweb-web"
    }
    [binding] = [
        o
        for o in objects
        if o["kind"] == "ClusterRoleBinding" and "worker" in o["metadata"]["name"]
    ]
    assert binding["subjects"][0]["name"] == "sched-watcher"


# --- secrets and rolling --------------------------------------------------------------------


def test_no_object_is_a_hook_but_the_helm_test():
    for obj in chart_render(values=["exposed"]):
        hook = obj["metadata"].get("annotations", {}).get("helm.sh/hook")
        assert hook in (None, "test"), f"{obj['kind']}/{obj['metadata']['name']}: {hook}"
        if hook == "test":
            assert obj["kind"] == "Pod"


def _checksums(objects) -> dict[str, str]:
    return {
        o["metadata"]["name"]: o["spec"]["template"]["metadata"]["annotations"]["checksum/secret"]
        for o in objects
        if o["kind"] == "Deployment" and o["metadata"]["name"] != "schedweb-redis"
        and "schedweb-scheduler" not in o["metadata"]["name"]
    }  # fmt: skip


def test_the_pods_roll_when_the_secrets_values_change_and_only_then():
    base = chart_render(values=["default"])
    again = chart_render(values=["default"])
    moved = chart_render(
        values=["default"], set_values={"database.url": "postgres://u:p@elsewhere:5432/db"}
    )
    scaled = chart_render(values=["default"], set_values={"web.replicas": "3"})
    assert _checksums(base) == _checksums(again) == _checksums(scaled)  # the generated key too
    assert set(_checksums(moved)) == set(_checksums(base))
    assert all(_checksums(moved)[n] != c for n, c in _checksums(base).items())


def _job(objects):
    [job] = [o for o in objects if o["kind"] == "Job"]
    return job


def test_the_migrations_job_is_named_after_its_spec_and_creates_the_first_admin():
    base = _job(chart_render(values=["default"]))
    assert re.fullmatch(r"schedweb-migrate-[0-9a-f]{8}", base["metadata"]["name"])
    same = _job(chart_render(values=["default"], set_values={"web.replicas": "5"}))
    new_image = _job(chart_render(values=["default"], set_values={"image.tag": "0.2.0"}))
    assert same["metadata"]["name"] == base["metadata"]["name"]
    assert new_image["metadata"]["name"] != base["metadata"]["name"]
    spec = base["spec"]["template"]["spec"]
    [container] = spec["containers"]
    assert container["resources"]["limits"]["memory"]
    command = " ".join(container["command"])
    assert "migrate --noinput" in command
    assert "adduser admin --role admin --if-no-users --password-file" in command
    admin = next(v for v in spec["volumes"] if v["name"] == "admin")
    assert admin["secret"]["secretName"] == "schedweb-admin"
    # web, worker and beat wait for it; the extender (no table read) does not
    specs = _component_specs(chart_render(values=["default"]))
    for component in ("web", "worker", "beat"):
        [wait] = specs[component]["initContainers"]
        assert "migrate --check" in " ".join(wait["command"])
    assert "initContainers" not in specs["extender"]


def test_operator_secrets_are_used_and_none_is_made():
    objects = chart_render(values=["tuned"])
    assert [o for o in objects if o["kind"] == "Secret"] == []
    job = _job(objects)["spec"]["template"]["spec"]
    admin = next(v for v in job["volumes"] if v["name"] == "admin")
    assert admin["secret"]["secretName"] == "sched-admin"
    assert admin["secret"]["items"] == [{"key": "initial-password", "path": "password"}]
    assert "adduser platform-admin" in " ".join(job["containers"][0]["command"])


# --- images, pull secrets, scheduling ---------------------------------------------------------


def _containers(spec):
    return spec["containers"] + spec.get("initContainers", [])


def test_every_pod_pulls_with_the_pull_secrets_and_images_by_digest():
    objects = chart_render(values=["tuned"])
    specs = pod_specs(objects) + [
        (f"Pod/{o['metadata']['name']}", o["spec"]) for o in objects if o["kind"] == "Pod"
    ]
    assert len(specs) >= 8  # web, extender, worker, beat, redis, scheduler, the Job, the test
    for where, spec in specs:
        assert spec.get("imagePullSecrets") == [{"name": "registry-creds"}], where
        for container in _containers(spec):
            image = container["image"]
            if "kube-scheduler" in image:
                assert image == "registry.k8s.io/kube-scheduler:v1.35.8"
            else:
                assert "@sha256:" in image, (where, image)


def test_redis_and_the_scheduler_run_exact_versions():
    objects = chart_render(values=["scheduler"])
    redis = _named(objects, "Deployment", "schedweb-redis")["spec"]["template"]["spec"]
    image = redis["containers"][0]["image"]
    assert re.fullmatch(r"docker\.io/library/redis:\d+\.\d+\.\d+-alpine", image), image
    scheduler = _named(objects, "Deployment", "schedweb-scheduler")["spec"]["template"]["spec"]
    assert re.fullmatch(r".*:v\d+\.\d+\.\d+", scheduler["containers"][0]["image"])


def test_scheduling_fields_reach_each_component():
    objects = chart_render(values=["tuned"])
    specs = _component_specs(objects)
    for component in COMPONENTS:
        spec = specs[component]
        assert spec["nodeSelector"] == {"node-role.example.com/platform": "true"}, component
        assert spec["tolerations"][0]["key"] == "dedicated", component
    assert specs["extender"]["priorityClassName"] == "platform-critical"
    assert specs["beat"]["priorityClassName"] == "platform-standard"
    assert "nodeAffinity" in specs["extender"]["affinity"]  # the component's own affinity
    for component in ("web", "worker"):
        [spread] = specs[component]["topologySpreadConstraints"]
        assert spread["topologyKey"] == "topology.kubernetes.io/zone"
        assert spread["whenUnsatisfiable"] == "DoNotSchedule"
    web = _named(objects, "Deployment", "sched-web")["spec"]["template"]["metadata"]
    assert web["labels"]["cost-center"] == "platform"
    assert web["annotations"]["example.com/team"] == "platform"
    scheduler = _named(objects, "Deployment", "schedweb-scheduler")["spec"]["template"]["spec"]
    assert scheduler["containers"][0]["resources"]["limits"] == {"memory": "2Gi"}
    assert scheduler["nodeSelector"] == {"node-role.example.com/platform": "true"}


def test_names_follow_name_overrides():
    named = {o["metadata"]["name"] for o in chart_render(values=["tuned"])}
    assert {"sched-web", "sched-extender", "sched-worker", "sched-beat"} <= named
    renamed = chart_render(values=["default"], set_values={"nameOverride": "sw"}, release="prod")
    deployments = {o["metadata"]["name"] for o in renamed if o["kind"] == "Deployment"}
    assert deployments == {"prod-sw-web", "prod-sw-extender", "prod-sw-worker", "prod-sw-beat",
                           "prod-sw-redis"}  # fmt: skip
    web = _named(renamed, "Deployment", "prod-sw-web")
    assert web["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "sw"


def test_the_defaults_run_web_and_extender_twice_beat_once_with_disruption_budgets():
    objects = chart_render(values=["default"])
    deployments = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    assert deployments["schedweb-web"]["spec"]["replicas"] >= 2
    assert deployments["schedweb-extender"]["spec"]["replicas"] >= 2
    beat = deployments["schedweb-beat"]["spec"]
    assert beat["replicas"] == 1 and beat["strategy"] == {"type": "Recreate"}
    extender = deployments["schedweb-extender"]["spec"]["template"]["spec"]
    container = extender["containers"][0]
    assert container["readinessProbe"]["exec"]["command"][-1] == "/readyz"
    assert container["livenessProbe"]["exec"]["command"][-1] == "/healthz"
    assert container["lifecycle"]["preStop"] == {"sleep": {"seconds": 5}}
    assert extender["terminationGracePeriodSeconds"] > 5
    assert extender["affinity"]["podAntiAffinity"]
    # on kube-scheduler's critical path: a priority class of its own, above ordinary pods
    assert extender["priorityClassName"] == "schedweb-extender"
    priority = _named(objects, "PriorityClass", "schedweb-extender")
    assert priority["value"] > 0 and priority["globalDefault"] is False
    budgets = {o["metadata"]["name"] for o in objects if o["kind"] == "PodDisruptionBudget"}
    assert budgets == {"schedweb-web", "schedweb-extender"}
    single = chart_render(
        values=["default"], set_values={"web.replicas": "1", "extender.replicas": "1"}
    )
    assert [o for o in single if o["kind"] == "PodDisruptionBudget"] == []
    multi = chart_render(values=["default"], set_values={"worker.replicas": "2"})
    assert "schedweb-worker" in {
        o["metadata"]["name"] for o in multi if o["kind"] == "PodDisruptionBudget"
    }


def test_worker_and_beat_have_liveness_and_startup_probes_on_their_heartbeat():
    specs = _component_specs(chart_render(values=["default"]))
    for component in ("worker", "beat"):
        [container] = specs[component]["containers"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["SCHEDWEB_LIVENESS_FILE"] == "/tmp/alive"
        for probe in ("livenessProbe", "startupProbe"):
            command = container[probe]["exec"]["command"]
            assert command[:4] == ["python", "-m", "schedweb.liveness", "/tmp/alive"], component
    beat = specs["beat"]["containers"][0]["command"]
    assert beat[beat.index("--scheduler") + 1] == "schedweb.celery:BeatScheduler"


def test_the_defaults_store_no_data_in_an_empty_dir():
    """/tmp is the only emptyDir (bounded); PostgreSQL is external, Redis keeps nothing on disk."""
    for where, spec in pod_specs(chart_render(values=["default"])):
        for volume in spec.get("volumes", []):
            if "emptyDir" in volume:
                assert volume["name"] == "tmp" and volume["emptyDir"]["sizeLimit"], where


@pytest.mark.parametrize("value_set", ["default", "scheduler", "exposed"])
def test_no_container_has_privileged_settings(value_set):
    """Non-root, read-only root filesystem, no privilege escalation, every capability dropped,
    no host namespaces or host paths."""
    problems = []
    objects = chart_render(values=[value_set])
    specs = pod_specs(objects) + [
        (o["metadata"]["name"], o["spec"]) for o in objects if o["kind"] == "Pod"
    ]
    for where, spec in specs:
        pod = spec.get("securityContext", {})
        for key in ("hostNetwork", "hostPID", "hostIPC"):
            if spec.get(key):
                problems.append(f"{where}: {key}")
        if any("hostPath" in v for v in spec.get("volumes", [])):
            problems.append(f"{where}: hostPath")
        for container in _containers(spec):
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


@pytest.mark.parametrize("value_set", ["default", "scheduler", "exposed"])
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
        spec = {k: v for k, v in spec.items() if k != "priorityClassName"}  # not created here
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


# --- reaching the web pods ------------------------------------------------------------------


def _env(container) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


@pytest.mark.django_db
def test_the_web_probes_reach_the_health_views_through_the_charts_production_settings(
    settings, client
):
    """The kubelet's GET with the probe's Host (the web Service's name, an internal host) is
    answered, not redirected to HTTPS, under the settings the chart gives the web pods; a public
    host is redirected, a host in neither list refused."""
    web = _named(chart_render(values=["exposed"]), "Deployment", "schedweb-web")
    container = web["spec"]["template"]["spec"]["containers"][0]
    env = _env(container)
    assert (env["SCHEDWEB_HTTPS"], env["SCHEDWEB_BEHIND_PROXY"]) == ("1", "1")
    internal = env["SCHEDWEB_INTERNAL_HOSTS"].split(",")
    assert {"127.0.0.1", "localhost", "schedweb-web.schedweb.svc"} <= set(internal)
    assert env["SCHEDWEB_ALLOWED_HOSTS"] == "schedweb.example.com"  # the Ingress's host
    settings.SCHEDWEB_INTERNAL_HOSTS = internal
    settings.ALLOWED_HOSTS = env["SCHEDWEB_ALLOWED_HOSTS"].split(",") + internal
    settings.SECURE_SSL_REDIRECT = False
    settings.MIDDLEWARE = [
        *settings.MIDDLEWARE[:1],
        "schedweb.https_redirect.HttpsRedirectMiddleware",
        *settings.MIDDLEWARE[1:],
    ]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    for probe in ("livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        headers = {h["name"]: h["value"] for h in get["httpHeaders"]}
        response = client.get(get["path"], HTTP_HOST=headers["Host"])
        assert response.status_code in (200, 503), (probe, response.status_code)  # answered
    public = client.get("/healthz", HTTP_HOST="schedweb.example.com")
    assert public.status_code == 301 and public["Location"].startswith("https://")
    assert client.get("/healthz", HTTP_HOST="10.1.2.3:8000").status_code == 400


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


def test_prometheus_scrapes_a_metrics_port_of_its_own_with_a_token_not_the_extender_port():
    objects = chart_render(values=["exposed"])
    [monitor] = [o for o in objects if o["kind"] == "ServiceMonitor"]
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "metrics" and endpoint["scheme"] == "http"
    assert endpoint["authorization"]["credentials"] == {"name": "schedweb-metrics", "key": "token"}
    assert "tlsConfig" not in endpoint  # no client certificate: the verbs stay closed to it
    service = _named(objects, "Service", "schedweb-extender-metrics")
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9102, "targetPort": "metrics"}]
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    extender_service = _named(objects, "Service", "schedweb-extender")
    assert [p["port"] for p in extender_service["spec"]["ports"]] == [8443]
    pod = _named(objects, "Deployment", "schedweb-extender")["spec"]["template"]["spec"]
    metrics = next(c for c in pod["containers"] if c["name"] == "metrics")
    assert metrics["command"] == ["python", "-m", "schedweb.metrics_proxy"]
    rules = _named(objects, "NetworkPolicy", "schedweb-extender")["spec"]["ingress"]
    by_port = {r["ports"][0]["port"]: r.get("from") for r in rules}
    assert by_port[9102] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    assert 8443 not in by_port  # no scheduler in this set: the verbs' port stays closed
    assert any(
        o["kind"] == "Secret" and o["metadata"]["name"] == "schedweb-metrics" for o in objects
    )


def test_the_helm_test_reaches_the_web_service_and_is_let_through_its_network_policy():
    objects = chart_render(values=["exposed"])
    [test] = [o for o in objects if o["kind"] == "Pod"]
    assert test["metadata"]["annotations"]["helm.sh/hook"] == "test"
    script = test["spec"]["containers"][0]["command"][-1]
    assert "http://schedweb-web.schedweb.svc:8000" in script and "/readyz" in script
    web = _named(objects, "NetworkPolicy", "schedweb-web")
    peers = web["spec"]["ingress"][0]["from"]
    assert {"podSelector": {"matchLabels": {
        "app.kubernetes.io/name": "schedweb", "app.kubernetes.io/instance": "schedweb",
        "app.kubernetes.io/component": "test"}}} in peers  # fmt: skip
    assert test["metadata"]["labels"]["app.kubernetes.io/component"] == "test"


def test_cert_manager_issues_the_server_certificate_and_one_client_certificate_per_client():
    objects = chart_render(
        values=["queue"],
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
        "schedweb-kube-apiserver",
    }
    server = certificates["schedweb-extender-tls"]["spec"]
    assert "schedweb-extender.schedweb.svc" in server["dnsNames"]
    assert server["usages"][0] == "server auth" and server["renewBefore"]
    clients = [s for s in certificates if s != "schedweb-extender-tls"]
    names = [certificates[c]["spec"]["commonName"] for c in clients]
    assert len(set(names)) == len(names) == 3  # each client its own subject (issue 27)
    for client in clients:
        assert certificates[client]["spec"]["usages"][0] == "client auth"
        assert certificates[client]["spec"]["issuerRef"]["name"] == "ca-issuer"
    # The Secrets the pods mount are the ones issued.
    extender = _named(objects, "Deployment", "schedweb-extender")["spec"]["template"]["spec"]
    mounted = {v["secret"]["secretName"] for v in extender["volumes"] if "secret" in v}
    assert mounted == {"schedweb-extender-tls", "schedweb-extender-probe"}
    # Each issued subject has its own job on the listener (schedweb/client_certs.py): the second
    # scheduler's the verbs, kube-apiserver's the queue webhook, the probe's neither.
    env = _env(next(c for c in extender["containers"] if c["name"] == "extender"))
    roles = {
        role: env[f"SCHEDWEB_EXTENDER_{role}_CLIENTS"].split(",")
        for role in ("SCHEDULER", "WEBHOOK")
    }
    subject = {c: certificates[c]["spec"]["commonName"] for c in clients}
    assert subject["schedweb-scheduler-extender-tls"] in roles["SCHEDULER"]
    assert subject["schedweb-scheduler-extender-tls"] not in roles["WEBHOOK"]
    assert subject["schedweb-kube-apiserver"] in roles["WEBHOOK"]
    assert subject["schedweb-kube-apiserver"] not in roles["SCHEDULER"]
    assert subject["schedweb-extender-probe"] not in roles["SCHEDULER"] + roles["WEBHOOK"]
    done = helm(
        "template", "schedweb", str(CHART), "-f", str(VALUE_SETS / "default-values.yaml"),
        "--set", "tls.certManager.enabled=true",
    )  # fmt: skip
    assert done.returncode != 0 and "tls.certManager.issuerRef.name is required" in done.stderr


def test_an_ingress_or_a_route_without_its_target_is_refused_with_the_value_to_set():
    for setting, message in (
        ("ingress.enabled=true", "ingress.hosts: name at least one host"),
        ("gateway.enabled=true", "gateway.parentRefs: name the Gateway"),
        ("metrics.serviceMonitor.enabled=true", "needs metrics.enabled"),
        (
            "queue.enabled=true,queue.priorityRange.min=10,queue.priorityRange.max=5",
            "min (10) is above max (5)",
        ),
    ):
        done = helm(
            "template", "schedweb", str(CHART), "-f", str(VALUE_SETS / "default-values.yaml"),
            "--set", setting,
        )  # fmt: skip
        assert done.returncode != 0 and message in done.stderr, (setting, done.stderr)
