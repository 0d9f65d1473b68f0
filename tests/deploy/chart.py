"""The chart under test: find the helm binary scripts/helm-binary.sh built, render the chart
with value sets, and map rendered objects to API paths through the API server's discovery."""

from __future__ import annotations

import functools
import hashlib
import json
import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.harness.kubeapi import KubeApi

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "deploy" / "helm" / "schedweb"
VALUE_SETS = CHART / "ci"
HELM_MODULE = REPO_ROOT / "tests" / "harness" / "helm"
BUILD_SCRIPT = "scripts/helm-binary.sh"


class HelmMissing(RuntimeError):
    """helm is absent or was built from another go.mod."""


def helm_find() -> Path:
    """The helm binary built from the current tests/harness/helm/go.mod and go.sum."""
    go_mod = (HELM_MODULE / "go.mod").read_text()
    match = re.search(r"^\s*(?:require\s+)?helm\.sh/helm/v3 (v\S+)", go_mod, re.MULTILINE)
    if match is None:
        raise HelmMissing(f"{HELM_MODULE / 'go.mod'} does not require helm.sh/helm/v3")
    folder = REPO_ROOT / ".cache" / "helm" / match.group(1)
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((HELM_MODULE / name).read_bytes())
    stamp = folder / ".stamp"
    if not (folder / "helm").is_file() or not stamp.is_file():
        raise HelmMissing(f"no helm in {folder}: run {BUILD_SCRIPT} first")
    if stamp.read_text().strip() != digest.hexdigest():
        raise HelmMissing(f"{folder / 'helm'} was built from another go.mod: run {BUILD_SCRIPT}")
    return folder / "helm"


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    """Run helm; the completed process (check the return code yourself)."""
    return subprocess.run(
        [str(helm_find()), *args], capture_output=True, text=True, timeout=120, check=False
    )


def chart_render(
    *,
    values: Iterable[str] = (),
    set_values: Mapping[str, str] = {},
    value_files: Iterable[Path] = (),
    release: str = "schedweb",
    namespace: str = "schedweb",
) -> list[dict[str, Any]]:
    """`helm template` with the named value sets of ci/, then `value_files`, then --set pairs:
    the objects."""
    args = ["template", release, str(CHART), "--namespace", namespace]
    for name in values:
        args += ["-f", str(VALUE_SETS / f"{name}-values.yaml")]
    for path in value_files:
        args += ["-f", str(path)]
    for key, value in set_values.items():
        args += ["--set", f"{key}={value}"]
    done = helm(*args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def pod_specs(objects: Iterable[Mapping[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(kind/name, pod spec) of every pod template among `objects`."""
    found = []
    for obj in objects:
        if obj["kind"] in ("Deployment", "Job", "StatefulSet", "DaemonSet"):
            found.append((f"{obj['kind']}/{obj['metadata']['name']}", obj["spec"]["template"]))
    return [(where, template["spec"]) for where, template in found]


@functools.cache
def _resources(api_url: str, group_version: str, api: KubeApi) -> dict[str, tuple[str, bool]]:
    base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    listing = api.get(base)
    return {
        r["kind"]: (r["name"], r["namespaced"])
        for r in listing["resources"]
        if "/" not in r["name"]
    }


def object_path(api: KubeApi, obj: Mapping[str, Any]) -> str:
    """The collection path to create `obj` at, from discovery (its kind's resource name)."""
    group_version = obj["apiVersion"]
    name, namespaced = _resources(api.url, group_version, api)[obj["kind"]]
    base = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    if namespaced:
        return f"{base}/namespaces/{obj['metadata']['namespace']}/{name}"
    return f"{base}/{name}"


def dry_run_create(api: KubeApi, obj: Mapping[str, Any]) -> Any:
    """Server-side dry run of creating `obj`: validation and admission run, nothing is stored."""
    return api.post(object_path(api, obj) + "?dryRun=All&fieldValidation=Strict", obj)


def pretty(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True)


# Custom resources some value sets render, created on the test API server as stand-ins: names,
# kinds and scopes as their projects define them, with an open schema (the projects' own schemas
# are not in this repository), so a dry run checks everything but their fields.
STAND_IN_CRDS = (
    ("cert-manager.io", "Certificate", "certificates", "v1"),
    ("monitoring.coreos.com", "ServiceMonitor", "servicemonitors", "v1"),
    ("gateway.networking.k8s.io", "HTTPRoute", "httproutes", "v1"),
)


def crds_ensure(api: KubeApi) -> None:
    """The STAND_IN_CRDS on `api`'s server, established (idempotent)."""
    from tests.harness.kubeapi import ApiError

    for group, kind, plural, version in STAND_IN_CRDS:
        name = f"{plural}.{group}"
        metadata: dict[str, Any] = {"name": name}
        if group.endswith(".k8s.io"):  # a protected group: its project's approval, as it has
            metadata["annotations"] = {
                "api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api/pull/1538"
            }
        body = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": metadata,
            "spec": {
                "group": group,
                "scope": "Namespaced",
                "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
                "versions": [
                    {
                        "name": version,
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                ],
            },
        }
        try:
            api.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body)
        except ApiError as err:
            if err.status != 409:
                raise
    _discovery_wait(api)


def _discovery_wait(api: KubeApi) -> None:
    import time

    deadline = time.monotonic() + 120
    for group, _kind, plural, version in STAND_IN_CRDS:
        while True:
            try:
                found = api.get(f"/apis/{group}/{version}")
                if any(r["name"] == plural for r in found.get("resources", [])):
                    break
            except Exception:  # not served yet
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{plural}.{group} is not served within 120 s")
            time.sleep(0.2)
    _resources.cache_clear()


def helm_install_dry_run(
    kubeconfig: Path,
    *,
    values: Iterable[str] = (),
    set_values: Mapping[str, str] = {},
    release: str = "schedweb",
    namespace: str = "schedweb",
) -> tuple[list[dict[str, Any]], str]:
    """`helm install --dry-run=server` against a real API server (lookup reads it, nothing is
    stored): the objects and the rendered NOTES.txt."""
    args = ["install", release, str(CHART), "--namespace", namespace, "--dry-run=server"]
    args += ["--kubeconfig", str(kubeconfig)]
    for name in values:
        args += ["-f", str(VALUE_SETS / f"{name}-values.yaml")]
    for key, value in set_values.items():
        args += ["--set", f"{key}={value}"]
    done = helm(*args)
    assert done.returncode == 0, done.stderr
    manifest = done.stdout.split("\nMANIFEST:\n", 1)[1].split("\nNOTES:\n", 1)
    notes = manifest[1] if len(manifest) > 1 else ""
    objects = [doc for doc in yaml.safe_load_all(manifest[0]) if doc]
    return objects, notes
