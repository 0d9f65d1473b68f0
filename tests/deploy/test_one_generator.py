"""One generator: the chart's second scheduler is, object for object, what `manage.py
schedulerconfig --manifests` prints (and so what the Connect page shows) for the same settings."""

from __future__ import annotations

import copy
import io

import pytest
import yaml
from django.core.management import call_command

from tests.deploy.chart import chart_render

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]

# The chart's extender Service for release "schedweb" in namespace "schedweb".
CHART_URL = "https://schedweb-extender.schedweb.svc:8443/extender/"
SCHEDULER_KINDS = {"ServiceAccount", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap"}


def _cli(*extra: str) -> str:
    out = io.StringIO()
    # The TLS files as schedweb's host sees them: only their presence matters here (in the pod
    # they are the Secret's, at /etc/schedweb-tls).
    call_command(
        "schedulerconfig",
        "--manifests",
        *("--url", CHART_URL, "--namespace", "schedweb", "--name", "schedweb-scheduler"),
        *("--ca-file", "ca.crt", "--cert-file", "client.crt", "--key-file", "client.key"),
        *extra,
        stdout=out,
    )
    return out.getvalue()


def _parsed(objects):
    """Objects by kind and name (helm orders them by kind), the ConfigMap's configuration
    parsed (its text layout may differ), without the chart's checksum of that configuration
    (on the Deployment's pod template: it rolls the pod on `helm upgrade`, which a printed
    manifest applied with kubectl does by itself)."""
    result = {}
    for obj in objects:
        if obj["kind"] == "ConfigMap":
            obj = {**obj, "data": {k: yaml.safe_load(v) for k, v in obj["data"].items()}}
        if obj["kind"] == "Deployment":
            obj = copy.deepcopy(obj)
            template = obj["spec"]["template"]["metadata"]
            annotations = template.pop("annotations", {})
            assert set(annotations) <= {"checksum/config"}, annotations
        result[obj["kind"], obj["metadata"]["name"]] = obj
    return result


def _chart_scheduler(values, set_values):
    rendered = chart_render(values=values, set_values=set_values)
    return [
        o
        for o in rendered
        if (o["kind"] in SCHEDULER_KINDS and o["metadata"]["name"].startswith("schedweb-scheduler"))
        or (o["kind"] == "Deployment" and o["metadata"]["name"] == "schedweb-scheduler")
    ]


@pytest.mark.parametrize(
    ("set_values", "flags"),
    [
        ({}, ["--no-bind"]),
        ({"scheduler.ignorable": "true"}, ["--ignorable", "--no-bind"]),
        (
            {"bind": "true", "scheduler.weight": "5", "scheduler.allNodes": "true"},
            ["--bind", "--weight", "5", "--all-nodes"],
        ),
        (
            {"scheduler.schedulerNames": "{gpu,batch}", "scheduler.preempt": "false"},
            ["--scheduler-name", "gpu", "--scheduler-name", "batch", "--no-preempt", "--no-bind"],
        ),
    ],
)
def test_the_charts_second_scheduler_is_what_schedulerconfig_prints(set_values, flags):
    chart = _chart_scheduler(["default"], {"scheduler.enabled": "true", **set_values})
    printed = [d for d in yaml.safe_load_all(_cli(*flags)) if d]
    assert len(chart) == len(printed) == 7
    assert _parsed(chart) == _parsed(printed)


def test_the_generated_yaml_has_no_anchors_and_the_configuration_as_a_literal_block():
    text = _cli("--no-bind")
    assert "&id" not in text and "*id" not in text
    assert "  scheduler-config.yaml: |\n    apiVersion: kubescheduler.config.k8s.io/v1\n" in text


def test_the_connect_page_in_the_charts_web_pod_shows_the_charts_second_scheduler(settings):
    """The Connect page, with the settings the chart gives the web pods and the release's
    namespace typed in, shows the chart's second-scheduler objects."""
    from tests.conftest import client_for

    rendered = chart_render(values=["default"], set_values={"scheduler.enabled": "true"})
    web = next(
        o for o in rendered if o["kind"] == "Deployment" and o["metadata"]["name"] == "schedweb-web"
    )
    env = {
        e["name"]: e["value"]
        for e in web["spec"]["template"]["spec"]["containers"][0]["env"]
        if "value" in e
    }
    settings.SCHEDWEB_EXTENDER_URL = env["SCHEDWEB_EXTENDER_URL"]
    for name in ("CA", "CERT", "KEY"):
        setattr(
            settings,
            f"SCHEDWEB_EXTENDER_SCHEDULER_{name}",
            env[f"SCHEDWEB_EXTENDER_SCHEDULER_{name}"],
        )
    params = {"weight": "1", "node_cache_capable": "on", "namespace": "schedweb"}
    out = client_for("viewer").get("/connect/", params).context["out"]
    shown = [d for d in yaml.safe_load_all(out["manifests"]) if d]
    assert _parsed(shown) == _parsed(_chart_scheduler(["default"], {"scheduler.enabled": "true"}))
    assert "--namespace schedweb" in out["cli_manifests"]
