"""kube-apiserver's side of schedweb's webhook for end-to-end tests: an admission configuration
giving kube-apiserver the stack's client certificate (the extender listener wants mutual TLS),
and the MutatingWebhookConfiguration as `schedulerconfig --manifests` prints it."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.harness.kubeapi import ApiError

WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


def admission_config_write(directory: Path, *, tls_dir: Path) -> Path:
    """--admission-control-config-file for kube-apiserver: a kubeconfig whose user `*` (any
    webhook host) is the stack's client certificate."""
    kubeconfig = directory / "webhook.kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "users": [
                    {
                        "name": "*",
                        "user": {
                            "client-certificate": str(tls_dir / "client.crt"),
                            "client-key": str(tls_dir / "client.key"),
                        },
                    }
                ],
            }
        )
    )
    path = directory / "admission.yaml"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": "AdmissionConfiguration",
                "plugins": [
                    {
                        "name": "MutatingAdmissionWebhook",
                        "configuration": {
                            "apiVersion": "apiserver.config.k8s.io/v1",
                            "kind": "WebhookAdmissionConfiguration",
                            "kubeConfigFile": str(kubeconfig),
                        },
                    }
                ],
            }
        )
    )
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
