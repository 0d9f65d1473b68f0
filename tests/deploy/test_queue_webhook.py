"""The chart's queue webhook (queue.policies): the MutatingWebhookConfiguration
policies/schedulerconfig.py queue_webhook_configuration builds for the same inputs (what
`schedulerconfig --manifests` and the Connect page print), refused values named, and on the real
kube-apiserver it never sends a pod of kube-system or of the release's namespace."""

from __future__ import annotations

import time
import uuid

import pytest
import yaml

from policies.schedulerconfig import QueuePolicy, queue_webhook_configuration
from tests.deploy.chart import VALUE_SETS, chart_render, dry_run_create, helm
from tests.harness.kubeapi import ApiError

pytestmark = pytest.mark.cluster

CA = "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIUY2kgdGVzdA==\n-----END CERTIFICATE-----\n"
WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def _values_file(tmp_path, values) -> list:
    path = tmp_path / "queue.yaml"
    path.write_text(yaml.safe_dump(values))
    return [path]


def _webhook_configs(objects):
    return [o for o in objects if o["kind"] == "MutatingWebhookConfiguration"]


def _without_chart_metadata(obj):
    """The object without the labels and annotations the chart (or the CLI) adds."""
    meta = {k: v for k, v in obj["metadata"].items() if k not in ("labels", "annotations")}
    return {**obj, "metadata": meta}


def _policy_values(policies: list[QueuePolicy]) -> list[dict]:
    return [
        {
            "name": p.name,
            "failurePolicy": p.failure_policy,
            "schedulerNames": list(p.scheduler_names),
        }
        for p in policies
    ]


@pytest.mark.parametrize(
    ("release", "namespace", "port", "policies"),
    [
        ("schedweb", "schedweb", 8443, [QueuePolicy("seed-002-queue", "Ignore", ("schedweb",))]),
        (
            "prod",
            "sched-system",
            9443,
            [
                QueuePolicy("seed-002-queue", "Ignore", ("schedweb",)),
                QueuePolicy("batch", "Fail", ("batch-a", "batch-b")),
            ],
        ),
        ("schedweb-eu", "ops", 8443, [QueuePolicy("gangs", "Fail", ("gang", "gang-2", "x"))]),
    ],
)
def test_the_charts_queue_webhook_is_what_queue_webhook_configuration_builds(
    tmp_path, release, namespace, port, policies
):
    values = {
        "queue": {"enabled": True, "policies": _policy_values(policies), "caBundle": CA},
        "extender": {"port": port},
    }
    rendered = chart_render(
        values=["default"],
        value_files=_values_file(tmp_path, values),
        release=release,
        namespace=namespace,
    )
    [chart] = _webhook_configs(rendered)
    fullname = release if "schedweb" in release else f"{release}-schedweb"
    expected = queue_webhook_configuration(
        extender_url=f"https://{fullname}-extender.{namespace}.svc:{port}/extender/",
        policies=policies,
        ca_bundle=CA,
        name=f"{fullname}-queue",
        extra_namespaces=(namespace,),
    )
    assert _without_chart_metadata(chart) == _without_chart_metadata(expected)
    for webhook in chart["webhooks"]:
        excluded = webhook["namespaceSelector"]["matchExpressions"][0]["values"]
        assert {"kube-system", "kube-public", "kube-node-lease", namespace} <= set(excluded)


def test_with_cert_manager_the_ca_bundle_is_injected_from_the_extenders_certificate(tmp_path):
    policies = [QueuePolicy("seed-002-queue", "Ignore", ("schedweb",))]
    values = {
        "queue": {"enabled": True, "policies": _policy_values(policies)},
        "tls": {"certManager": {"enabled": True, "issuerRef": {"name": "ca-issuer"}}},
    }
    rendered = chart_render(values=["default"], value_files=_values_file(tmp_path, values))
    [chart] = _webhook_configs(rendered)
    annotation = chart["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    assert annotation == "schedweb/schedweb-extender"
    # ... the Certificate of the extender's server certificate, which the chart renders.
    assert any(
        o["kind"] == "Certificate" and o["metadata"]["name"] == "schedweb-extender"
        for o in rendered
    )
    expected = queue_webhook_configuration(
        extender_url="https://schedweb-extender.schedweb.svc:8443/extender/",
        policies=policies,
        extra_namespaces=("schedweb",),
    )
    assert "caBundle" not in chart["webhooks"][0]["clientConfig"]
    assert _without_chart_metadata(chart) == _without_chart_metadata(expected)


def test_no_webhook_configuration_without_queue_or_without_policies(tmp_path):
    assert _webhook_configs(chart_render(values=["default"])) == []
    on_empty = {"queue": {"enabled": True, "policies": [], "caBundle": CA}}
    assert (
        _webhook_configs(
            chart_render(values=["default"], value_files=_values_file(tmp_path, on_empty))
        )
        == []
    )
    off = {
        "queue": {
            "enabled": False,
            "policies": [{"name": "a", "failurePolicy": "Fail", "schedulerNames": ["s"]}],
        }
    }
    assert (
        _webhook_configs(chart_render(values=["default"], value_files=_values_file(tmp_path, off)))
        == []
    )


def _template_error(tmp_path, queue) -> str:
    path = _values_file(tmp_path, {"queue": {"enabled": True, **queue}})[0]
    done = helm(
        "template",
        "schedweb",
        str(VALUE_SETS.parent),
        "-f",
        str(VALUE_SETS / "default-values.yaml"),
        "-f",
        str(path),
    )
    assert done.returncode != 0, done.stdout
    return done.stderr


@pytest.mark.parametrize(
    ("queue", "message"),
    [
        (
            {
                "policies": [{"name": "a", "failurePolicy": "Never", "schedulerNames": ["s"]}],
                "caBundle": CA,
            },
            "at '/queue/policies/0/failurePolicy': value must be one of 'Ignore', 'Fail'",
        ),
        (
            {
                "policies": [
                    {"name": "a", "failurePolicy": "Fail", "schedulerNames": ["s"]},
                    {"name": "b", "schedulerNames": ["s"]},
                ],
                "caBundle": CA,
            },
            "at '/queue/policies/1': missing property 'failurePolicy'",
        ),
        (
            {
                "policies": [{"name": "a", "failurePolicy": "Fail", "schedulerNames": []}],
                "caBundle": CA,
            },
            "at '/queue/policies/0/schedulerNames': minItems: got 0, want 1",
        ),
        (
            {"policies": [{"failurePolicy": "Fail", "schedulerNames": ["s"]}], "caBundle": CA},
            "at '/queue/policies/0': missing property 'name'",
        ),
        (
            {"policies": [{"name": "a", "failurePolicy": "Fail", "schedulerNames": ["s"]}]},
            "queue.caBundle is required with queue.policies",
        ),
    ],
)
def test_bad_queue_values_fail_the_render_naming_the_value(tmp_path, queue, message):
    assert message in _template_error(tmp_path, queue)


def _pod(namespace: str, scheduler: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "queue-probe", "namespace": namespace},
        "spec": {
            "schedulerName": scheduler,
            "automountServiceAccountToken": False,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        },
    }


def _refusal_awaited(api, pod, limit: float = 60.0) -> str:
    deadline = time.monotonic() + limit
    while True:
        try:
            dry_run_create(api, pod)
        except ApiError as err:
            return str(err)
        assert time.monotonic() < deadline, "the webhook configuration never took effect"
        time.sleep(0.2)


def test_on_the_api_server_the_webhook_never_blocks_kube_system_nor_the_release_namespace(
    control_plane, tmp_path
):
    """The chart's configuration, created on the real kube-apiserver with failurePolicy Fail and
    nothing serving its URL: a pod of its scheduler in an ordinary namespace is refused (so the
    webhook is called), the same pod in kube-system, kube-public, kube-node-lease, the release's
    namespace or labelled schedweb.io/queue=off, or of another scheduler, is admitted."""
    from tests.deploy.test_chart import namespace_ensure

    api = control_plane.api
    scheduler = f"queue-{uuid.uuid4().hex[:8]}"
    release = f"q{uuid.uuid4().hex[:6]}"
    values = {
        "queue": {
            "enabled": True,
            "policies": [
                {"name": "strict", "failurePolicy": "Fail", "schedulerNames": [scheduler]}
            ],
            "caBundle": CA,
        }
    }
    [config] = _webhook_configs(
        chart_render(
            values=["default"],
            value_files=_values_file(tmp_path, values),
            release=release,
            namespace="schedweb",
        )
    )
    for name in ("schedweb", "queue-tenant"):
        namespace_ensure(api, name)
    api.post(WEBHOOKS, config)
    try:
        # kube-apiserver loads webhook configurations through an informer: wait until it calls
        # this one (refuses the tenant's pod), bounded.
        error = _refusal_awaited(api, _pod("queue-tenant", scheduler))
        assert 'failed calling webhook "strict.queue.schedweb.io"' in error
        for namespace in ("kube-system", "kube-public", "kube-node-lease", "schedweb"):
            dry_run_create(api, _pod(namespace, scheduler))
        dry_run_create(api, _pod("queue-tenant", "default-scheduler"))
        opted_out = _pod("queue-tenant", scheduler)
        opted_out["metadata"]["labels"] = {"schedweb.io/queue": "off"}
        dry_run_create(api, opted_out)
    finally:
        api.delete(f"{WEBHOOKS}/{config['metadata']['name']}")
