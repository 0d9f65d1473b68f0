"""The generated scheduler configuration and second-scheduler manifests (run for real in tests/e2e)."""

from __future__ import annotations

import base64
import io

import pytest
import yaml
from django.core.management import call_command

from policies.schedulerconfig import IN_CLUSTER_EXTENDER_URL, url_is_loopback


def generate(*args: str) -> list[dict]:
    out = io.StringIO()
    call_command("schedulerconfig", *args, stdout=out)
    return list(yaml.safe_load_all(out.getvalue()))


@pytest.mark.django_db
def test_the_profile_scoping_keeps_the_default_profile_and_shares_the_extender():
    [config] = generate(
        "--url",
        "http://10.0.0.5:8000/extender/",
        "--scheduler-name",
        "schedweb",
        "--no-leader-elect",
    )
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert [p["schedulerName"] for p in config["profiles"]] == ["default-scheduler", "schedweb"]
    [extender] = config["extenders"]
    assert extender["urlPrefix"] == "http://10.0.0.5:8000/extender/"
    assert (extender["filterVerb"], extender["prioritizeVerb"], extender["preemptVerb"]) == (
        "filter",
        "prioritize",
        "preempt",
    )
    assert (
        extender["weight"] == 1
        and extender["nodeCacheCapable"] is True
        and "managedResources" not in extender
    )
    assert config["leaderElection"] == {"leaderElect": False}


@pytest.mark.django_db
def test_the_resource_scoping_selects_pods_by_a_managed_resource():
    [config] = generate("--scoping", "resource", "--second-scheduler", "--ignorable", "--bind")
    [extender] = config["extenders"]
    assert extender["managedResources"] == [
        {"name": "schedweb.io/scheduled", "ignoredByScheduler": True}
    ]
    assert extender["ignorable"] is True and extender["bindVerb"] == "bind"
    assert [p["schedulerName"] for p in config["profiles"]] == ["schedweb"]
    assert config["leaderElection"]["resourceName"] == "schedweb-scheduler"


@pytest.mark.django_db
def test_manifests_define_a_second_scheduler_with_its_rbac_and_config():
    docs = generate("--manifests", "--scheduler-name", "schedweb")
    kinds = [(d["kind"], d["metadata"]["name"]) for d in docs]
    assert kinds == [
        ("ServiceAccount", "schedweb-scheduler"),
        ("ClusterRoleBinding", "schedweb-scheduler-as-kube-scheduler"),
        ("ClusterRoleBinding", "schedweb-scheduler-as-volume-scheduler"),
        ("Role", "schedweb-scheduler-lease"),
        ("RoleBinding", "schedweb-scheduler-lease"),
        ("ConfigMap", "schedweb-scheduler-config"),
        ("Deployment", "schedweb-scheduler"),
    ]
    config = yaml.safe_load(docs[5]["data"]["scheduler-config.yaml"])
    assert "clientConnection" not in config  # in-cluster credentials
    assert [p["schedulerName"] for p in config["profiles"]] == ["schedweb"]
    pod = docs[6]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "schedweb-scheduler"
    assert pod["containers"][0]["command"][1] == "--config=/etc/schedweb/scheduler-config.yaml"


@pytest.mark.django_db
def test_replacing_the_main_schedulers_config_keeps_its_lease_a_second_scheduler_gets_its_own():
    [main] = generate("--url", "http://10.0.0.5:8000/extender/")
    assert main["leaderElection"]["resourceName"] == "kube-scheduler"
    [second] = generate("--url", "http://10.0.0.5:8000/extender/", "--second-scheduler")
    assert second["leaderElection"]["resourceName"] == "schedweb-scheduler"
    assert [p["schedulerName"] for p in second["profiles"]] == ["schedweb"]


@pytest.mark.django_db
def test_an_https_url_enables_https_with_the_tls_files():
    [config] = generate(
        "--url",
        "https://10.0.0.5:8443/extender/",
        "--scheduler-name",
        "schedweb",
        "--ca-file",
        "/etc/schedweb/ca.crt",
        "--cert-file",
        "/etc/schedweb/client.crt",
        "--key-file",
        "/etc/schedweb/client.key",
    )
    [extender] = config["extenders"]
    assert extender["enableHTTPS"] is True
    assert extender["tlsConfig"] == {
        "caFile": "/etc/schedweb/ca.crt",
        "certFile": "/etc/schedweb/client.crt",
        "keyFile": "/etc/schedweb/client.key",
    }


@pytest.mark.django_db
def test_tls_files_default_to_the_settings_and_plain_http_has_no_tls_config(settings):
    settings.SCHEDWEB_EXTENDER_SCHEDULER_CA = "/run/tls/ca.crt"
    # the command's defaults are read when its parser is built
    [config] = generate("--url", "https://127.0.0.1:8443/extender/", "--scheduler-name", "s")
    assert config["extenders"][0]["tlsConfig"] == {"caFile": "/run/tls/ca.crt"}
    [plain] = generate("--url", "http://127.0.0.1:8443/extender/", "--scheduler-name", "s")
    assert plain["extenders"][0]["enableHTTPS"] is False
    assert "tlsConfig" not in plain["extenders"][0]


def generate_text(*args: str) -> str:
    out = io.StringIO()
    call_command("schedulerconfig", *args, stdout=out)
    return out.getvalue()


MTLS = (
    "--url",
    "https://schedweb.example:8443/extender/",
    "--ca-file",
    "/srv/tls/ca.crt",
    "--cert-file",
    "/srv/tls/client.crt",
    "--key-file",
    "/srv/tls/client.key",
)


@pytest.mark.django_db
def test_a_second_scheduler_over_mutual_tls_mounts_the_files_where_its_tls_config_names_them():
    text = generate_text("--manifests", "--scheduler-name", "schedweb", *MTLS)
    docs = list(yaml.safe_load_all(text))
    config_map = next(d for d in docs if d["kind"] == "ConfigMap")
    config = yaml.safe_load(config_map["data"]["scheduler-config.yaml"])
    tls = config["extenders"][0]["tlsConfig"]
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    [container] = pod["containers"]
    # every tlsConfig path = a mount of the Secret volume + one of that Secret's keys
    volumes = {v["name"]: v for v in pod["volumes"]}
    secret_files = {}
    for mount in container["volumeMounts"]:
        secret = volumes[mount["name"]].get("secret")
        if secret:
            assert mount["readOnly"] is True
            secret_files |= {
                f"{mount['mountPath']}/{key}": (secret["secretName"], key)
                for key in ("ca.crt", "tls.crt", "tls.key")
            }
    assert set(tls) == {"caFile", "certFile", "keyFile"}
    assert {name: secret_files[path] for name, path in tls.items()} == {
        "caFile": ("schedweb-scheduler-extender-tls", "ca.crt"),
        "certFile": ("schedweb-scheduler-extender-tls", "tls.crt"),
        "keyFile": ("schedweb-scheduler-extender-tls", "tls.key"),
    }
    # the non-root container reads them through its group; nobody else does
    secret = next(v["secret"] for v in pod["volumes"] if "secret" in v)
    assert secret["defaultMode"] == 0o440
    assert pod["securityContext"]["fsGroup"] == container["securityContext"]["runAsUser"]
    # the Secret is made from the local files by the command the output leads with; no key
    # material is printed
    assert (
        "#   kubectl -n kube-system create secret generic schedweb-scheduler-extender-tls"
        " --from-file=ca.crt=/srv/tls/ca.crt --from-file=tls.crt=/srv/tls/client.crt"
        " --from-file=tls.key=/srv/tls/client.key\n"
    ) in text
    assert not any(d["kind"] == "Secret" for d in docs)


@pytest.mark.django_db
def test_a_second_scheduler_over_tls_mounts_only_the_ca_and_over_http_nothing():
    docs = generate("--manifests", "--url", "https://x:8443/extender/", "--ca-file", "/srv/ca.crt")
    config = yaml.safe_load(docs[5]["data"]["scheduler-config.yaml"])
    assert config["extenders"][0]["tlsConfig"] == {"caFile": "/etc/schedweb-tls/ca.crt"}
    plain = generate("--manifests", "--url", "http://127.0.0.1:8443/extender/", *MTLS[2:])
    pod = plain[6]["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["config"]
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}  # no fsGroup


@pytest.mark.django_db
def test_bind_is_refused_where_kube_scheduler_would_send_other_profiles_binds(capsys):
    # Extenders are global: with the default-scheduler profile kept, its pods' binds would reach
    # schedweb, which binds only its policies' pods: they would never be bound.
    with pytest.raises(SystemExit) as exit_:
        call_command("schedulerconfig", "--scheduler-name", "schedweb", "--bind")
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert "default-scheduler" in error and "--second-scheduler" in error
    # A second scheduler has only schedweb's profiles; resource scoping only opted-in pods.
    [second] = generate("--scheduler-name", "schedweb", "--bind", "--second-scheduler")
    assert [p["schedulerName"] for p in second["profiles"]] == ["schedweb"]
    assert second["extenders"][0]["bindVerb"] == "bind"
    [resource] = generate("--scheduler-name", "schedweb", "--bind", "--scoping", "resource")
    assert [p["schedulerName"] for p in resource["profiles"]] == ["default-scheduler", "schedweb"]
    assert resource["extenders"][0]["bindVerb"] == "bind"
    assert resource["extenders"][0]["managedResources"][0]["name"] == "schedweb.io/scheduled"
    # Without bind the shared extender passes other profiles' pods through: allowed.
    [shared] = generate("--scheduler-name", "schedweb", "--no-bind")
    assert "bindVerb" not in shared["extenders"][0]
    # A policy that targets default-scheduler itself leaves no profile out.
    [all_ours] = generate("--scheduler-name", "default-scheduler", "--bind")
    assert [p["schedulerName"] for p in all_ours["profiles"]] == ["default-scheduler"]


def test_the_rbac_lists_and_watches_exactly_what_the_snapshot_reads():
    # nodes and pods, plus what kube-scheduler's namespaceSelector (namespaces) and default
    # spreading (services and the three controllers) read; pods patched for the requeue nudge
    role = generate("--rbac")[0]
    assert role["kind"] == "ClusterRole"
    watched = {
        (group, resource)
        for rule in role["rules"]
        if rule["verbs"] == ["list", "watch"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert watched == {
        ("", "nodes"),
        ("", "pods"),
        ("", "namespaces"),
        ("", "services"),
        ("", "replicationcontrollers"),
        ("apps", "replicasets"),
        ("apps", "statefulsets"),
    }
    others = [r for r in role["rules"] if r["verbs"] != ["list", "watch"]]
    assert others == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("schedweb:8443/extender/", "an https:// URL with a host"),
        ("https://schedweb:8443/", "the path ends with /extender/"),
        ("https://user@schedweb:8443/extender/", "no user, query or fragment"),
    ],
)
def test_a_url_that_cannot_be_an_extender_prefix_is_refused_with_the_reason(url, message, capsys):
    with pytest.raises(SystemExit) as exited:
        call_command("schedulerconfig", "--url", url, "--scheduler-name", "schedweb")
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_the_rbac_with_queue_also_lists_and_creates_priority_classes_and_workloads():
    """Only policies with queue: or gang: need them (schedulerconfig --rbac --queue)."""
    with_queue = generate("--rbac", "--no-bind", "--queue")[0]
    assert with_queue["rules"][-1] == {
        "apiGroups": ["scheduling.k8s.io"],
        "resources": ["priorityclasses", "workloads"],
        "verbs": ["list", "create"],
    }
    without = generate("--rbac", "--bind")[0]
    assert all("scheduling.k8s.io" not in r["apiGroups"] for r in without["rules"])


# --- the queue webhook (issue 11) ------------------------------------------------------------


def test_the_queue_webhook_configuration_has_one_webhook_per_policy_scoped_away_from_kube_system():
    from policies.schedulerconfig import QueuePolicy, queue_webhook_configuration

    config = queue_webhook_configuration(
        extender_url="https://10.0.0.5:8443/extender/",
        policies=[
            QueuePolicy("seed-002-queue", "Ignore", ("schedweb",)),
            QueuePolicy("batch", "Fail", ("batch-a", "batch-b")),
        ],
        ca_bundle="-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    )
    assert config["kind"] == "MutatingWebhookConfiguration"
    first, second = config["webhooks"]
    assert first["name"] == "seed-002-queue.queue.schedweb.io"
    assert (first["failurePolicy"], second["failurePolicy"]) == ("Ignore", "Fail")
    assert first["clientConfig"]["url"] == "https://10.0.0.5:8443/admission/queue"
    assert base64.b64decode(first["clientConfig"]["caBundle"]).startswith(b"-----BEGIN")
    assert second["matchConditions"] == [
        {
            "name": "scheduler-name",
            "expression": "object.spec.schedulerName in ['batch-a', 'batch-b']",
        }
    ]
    (namespaces,) = first["namespaceSelector"]["matchExpressions"]
    assert namespaces["operator"] == "NotIn" and "kube-system" in namespaces["values"]
    assert first["rules"][0]["operations"] == ["CREATE"] and first["sideEffects"] == "None"


@pytest.mark.django_db
def test_manifests_end_with_the_queue_webhook_only_when_a_queue_policy_is_active(tmp_path):
    from pathlib import Path

    from policies import services
    from tests.conftest import make_user

    ca = tmp_path / "ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    args = ("--manifests", "--url", "https://10.0.0.5:8443/extender/", "--ca-file", str(ca))
    kinds = [d["kind"] for d in generate(*args) if d]
    assert "MutatingWebhookConfiguration" not in kinds
    publisher = make_user("pat", "publisher")
    examples = Path(__file__).resolve().parents[2] / "policies" / "examples"
    policy = services.policy_create(
        actor=publisher, document=(examples / "seed-002.yaml").read_text()
    )
    services.policy_publish(
        actor=publisher, policy=policy, message="v1", revision=policy.draft_revision
    )
    (config,) = [d for d in generate(*args) if d and d["kind"] == "MutatingWebhookConfiguration"]
    (webhook,) = config["webhooks"]
    assert webhook["name"] == "seed-002.queue.schedweb.io"
    assert webhook["clientConfig"]["url"] == "https://10.0.0.5:8443/admission/queue"
    assert base64.b64decode(webhook["clientConfig"]["caBundle"]) == ca.read_bytes()


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("https://127.0.0.1:8443/extender/", True),
        ("https://127.8.9.10:8443/extender/", True),
        ("https://[::1]:8443/extender/", True),
        ("http://localhost:8443/extender/", True),
        ("http://app.localhost/extender/", True),
        ("https://10.0.0.7:8443/extender/", False),
        ("https://schedweb-extender.schedweb.svc:8443/extender/", False),
        ("https://localhost.example.com/extender/", False),
        ("https://[::ffff:10.0.0.1]/extender/", False),
        ("not a url", False),
    ],
)
def test_loopback_urls_are_told_from_the_others(url, loopback):
    assert url_is_loopback(url) is loopback


@pytest.mark.django_db
def test_manifests_for_a_loopback_url_come_with_a_warning_naming_the_charts_service(capsys):
    generate("--manifests", "--url", "https://127.0.0.1:8443/extender/", "--no-bind")
    err = capsys.readouterr().err
    assert "loopback address" in err and IN_CLUSTER_EXTENDER_URL in err
    generate("--manifests", "--url", IN_CLUSTER_EXTENDER_URL, "--no-bind")
    assert capsys.readouterr().err == ""
