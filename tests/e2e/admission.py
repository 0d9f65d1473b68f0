"""kube-apiserver's side of schedweb's webhook for end-to-end tests: an admission configuration
giving kube-apiserver the stack's client certificate (the extender listener wants mutual TLS),
and the MutatingWebhookConfiguration as `schedulerconfig --manifests` prints it."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from policies.schedulerconfig import webhook_admission_configuration, webhook_url
from tests.harness.kubeapi import ApiError

WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def admission_config_write(directory: Path, *, extender_url: str, tls_dir: Path) -> Path:
    """--admission-control-config-file for kube-apiserver, as the Connect page and
    `webhook_admission_configuration` print it (its user named after the webhook's host:port),
    with the webhook client certificate of scripts/extender-certs.sh (CN=kube-apiserver: the
    only one the queue webhook accepts) and the kubeconfig's real path filled in."""
    text = webhook_admission_configuration(
        webhook_url=webhook_url(f"{extender_url}/extender/"),
        cert_file=str(tls_dir / "webhook.crt"),
        key_file=str(tls_dir / "webhook.key"),
    )
    admission, kubeconfig = yaml.safe_load_all(text)
    kubeconfig_path = directory / "webhook.kubeconfig"
    kubeconfig_path.write_text(json.dumps(kubeconfig))
    (plugin,) = admission["plugins"]
    plugin["configuration"]["kubeConfigFile"] = str(kubeconfig_path)
    path = directory / "admission.yaml"
    path.write_text(json.dumps(admission))
    return path


def webhook_apply(plane, stack) -> dict:
    """`schedulerconfig --manifests`' MutatingWebhookConfiguration, created or replaced."""
    out = stack.manage(
        "schedulerconfig",
        "--manifests",
        "--url",
        f"{stack.extender_url}/extender/",
        "--ca-file",
        str(stack.tls_dir / "ca.crt"),
    )
    (config,) = [
        d for d in yaml.safe_load_all(out) if d and d["kind"] == "MutatingWebhookConfiguration"
    ]
    name = config["metadata"]["name"]
    try:
        current = plane.api.get(f"{WEBHOOKS}/{name}")
    except ApiError:
        return plane.api.post(WEBHOOKS, config)
    config["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    return plane.api.put(f"{WEBHOOKS}/{name}", config)
