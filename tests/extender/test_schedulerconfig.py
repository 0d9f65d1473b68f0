"""The generated scheduler configuration and second-scheduler manifests (run for real in tests/e2e)."""

from __future__ import annotations

import io

import pytest
import yaml
from django.core.management import call_command


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
