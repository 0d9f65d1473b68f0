"""A stock kube-scheduler run against the test control plane with a generated
KubeSchedulerConfiguration: admin kubeconfig, no leader election, its secure port on 127.0.0.1
serving the control plane's certificate so health and /metrics can be read with CA checks."""

from __future__ import annotations

import copy
import ssl
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.harness.processes import ManagedProcess

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"


def scheduler_config(
    *, config: str | Mapping[str, Any], kubeconfig: Path, leader_election: bool = False
) -> dict[str, Any]:
    """Parse and complete a KubeSchedulerConfiguration; ValueError says what is wrong with it.

    Leader election stays off unless `leader_election` (schedulers that must each hold their
    own lease, as a second scheduler beside the default one does)."""
    if isinstance(config, str):
        try:
            parsed = yaml.safe_load(config)
        except yaml.YAMLError as err:
            raise ValueError(f"scheduler config is not valid YAML: {err}") from None
        parsed = {} if parsed is None else parsed
    else:
        parsed = copy.deepcopy(dict(config))
    if not isinstance(parsed, dict):
        raise ValueError(f"scheduler config must be a mapping, not {type(parsed).__name__}")
    parsed.setdefault("apiVersion", API_VERSION)
    parsed.setdefault("kind", KIND)
    if (parsed["apiVersion"], parsed["kind"]) != (API_VERSION, KIND):
        raise ValueError(
            f"scheduler config must be apiVersion {API_VERSION}, kind {KIND}; "
            f"got {parsed['apiVersion']}, {parsed['kind']}"
        )
    connection = parsed.setdefault("clientConnection", {})
    connection.setdefault("kubeconfig", str(kubeconfig))
    election = parsed.setdefault("leaderElection", {})
    if leader_election:
        return parsed
    if election.get("leaderElect", False):
        raise ValueError("leaderElection.leaderElect must stay false: test schedulers run alone")
    election["leaderElect"] = False
    return parsed


class SchedulerProcess:
    """A running kube-scheduler; `stop()` (or leaving the `with` block) ends it."""

    def __init__(
        self,
        *,
        binary: Path,
        config: dict[str, Any],
        name: str,
        workdir: Path,
        port: int,
        serving_cert: Path,
        serving_key: Path,
        ca_file: Path,
        token: str,
        kubeconfig: Path,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.url = f"https://127.0.0.1:{port}"
        self.config_path = workdir / f"{name}.yaml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self._token = token
        self._tls = ssl.create_default_context(cafile=str(ca_file))
        self._process = ManagedProcess(
            name=name,
            argv=[
                binary,
                f"--config={self.config_path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--tls-cert-file={serving_cert}",
                f"--tls-private-key-file={serving_key}",
                # As kubeadm does: delegated authn/authz through the admin kubeconfig, so /metrics
                # answers to the admin token.
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                *extra_args,
            ],
            log_path=workdir / f"{name}.log",
        )

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def log_path(self) -> Path:
        return self._process.log_path

    def exit_code(self) -> int | None:
        """None while running."""
        return self._process.exit_code()

    def get(self, path: str) -> str:
        """GET a path on the scheduler's secure port (e.g. /metrics) as the admin."""
        req = urllib.request.Request(self.url + path)
        req.add_header("Authorization", f"Bearer {self._token}")
        with urllib.request.urlopen(req, timeout=10, context=self._tls) as resp:
            return resp.read().decode()

    def start(self, *, timeout: float) -> None:
        """Start it and wait for /readyz, which holds until its informers have synced."""
        self._process.start()
        self._process.wait_ready(
            check=lambda: self.get("/readyz") == "ok", timeout=timeout, what="/readyz ok"
        )

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period; idempotent."""
        self._process.stop()

    def __enter__(self) -> SchedulerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
