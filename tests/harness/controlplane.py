"""A real, throwaway Kubernetes control plane on 127.0.0.1: stock etcd and kube-apiserver (RBAC on,
static tokens, generated certificates) plus stock kube-schedulers on demand. No kubelets and no
controller manager: Node objects are written with their status, pods are placed by binding."""

from __future__ import annotations

import hashlib
import itertools
import json
import secrets
import shutil
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.harness.binaries import binaries_find
from tests.harness.kubeapi import ApiError, KubeApi
from tests.harness.pki import Pki, pki_create
from tests.harness.processes import ManagedProcess, free_ports
from tests.harness.scheduler import SchedulerProcess, scheduler_config

ADMIN_USER = "schedweb-admin"  # in system:masters: every permission
LIMITED_USER = "schedweb-limited"  # authenticated but bound to no role: 403 on nodes and pods
# Admission plugins that wait for controllers this control plane does not run:
# ServiceAccount wants the default ServiceAccount the controller manager creates (pods would be
# refused), TaintNodesByCondition taints new nodes not-ready until the node lifecycle controller
# clears it (nothing would ever schedule).
DISABLED_ADMISSION = ("ServiceAccount", "TaintNodesByCondition")
SERVICE_CIDR = "10.96.0.0/16"


class ControlPlaneError(RuntimeError):
    """The control plane could not start, or was used before start()."""


class ControlPlane:
    """etcd + kube-apiserver in `workdir`; use as a context manager or call start()/stop()."""

    def __init__(
        self,
        workdir: Path,
        *,
        bin_dir: Path | None = None,
        startup_timeout: float = 90.0,
        apiserver_args: Sequence[str] = (),
    ) -> None:
        self.workdir = Path(workdir).resolve()
        # more kube-apiserver flags: feature gates, an admission configuration (issue 11)
        self.apiserver_args = tuple(apiserver_args)
        self.bin_dir = bin_dir if bin_dir is not None else binaries_find()
        self.startup_timeout = startup_timeout
        self.admin_token = secrets.token_urlsafe(32)
        self.limited_token = secrets.token_urlsafe(32)
        self.url = ""
        self.ca_file = self.workdir / "pki" / "ca.crt"
        self.kubeconfig = self.workdir / "kubeconfig"
        self._pki: Pki | None = None
        self._etcd: ManagedProcess | None = None
        self._apiserver: ManagedProcess | None = None
        self._schedulers: list[SchedulerProcess] = []
        self._scheduler_numbers = itertools.count(1)
        self._api: KubeApi | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> ControlPlane:
        """Start etcd and kube-apiserver and wait for /readyz; on any failure stop what started."""
        if self._etcd is not None:
            raise ControlPlaneError("this ControlPlane was already started")
        try:
            self._start()
        except BaseException:  # includes Ctrl-C while waiting: never leave a half-started plane
            self.stop()
            raise
        return self

    def _start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._remove_files()  # a previous run killed with SIGKILL may have left its etcd data
        self._pki = pki_create(directory=self.workdir / "pki")
        tokens = self.workdir / "tokens.csv"
        tokens.touch(mode=0o600)
        # token,user,uid,"groups" - the static token file format of --token-auth-file.
        tokens.write_text(
            f'{self.admin_token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n'
            f"{self.limited_token},{LIMITED_USER},{LIMITED_USER}\n"
        )
        etcd_port, peer_port, api_port = free_ports(count=3)
        self._start_etcd(client_port=etcd_port, peer_port=peer_port)
        self.url = f"https://127.0.0.1:{api_port}"
        self._start_apiserver(port=api_port, etcd_port=etcd_port, tokens=tokens)
        self._write_kubeconfig(path=self.kubeconfig, token=self.admin_token)

    def _start_etcd(self, *, client_port: int, peer_port: int) -> None:
        client, peer = f"http://127.0.0.1:{client_port}", f"http://127.0.0.1:{peer_port}"
        # Assigned before it starts, so that stop() ends it even if it never gets healthy.
        self._etcd = etcd = ManagedProcess(
            name="etcd",
            argv=[
                self.bin_dir / "etcd",
                "--name=schedweb",
                f"--data-dir={self.workdir / 'etcd-data'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=schedweb={peer}",
                "--unsafe-no-fsync",  # test data: skip fsync, much faster on shared disks
                "--log-level=warn",
            ],
            log_path=self.workdir / "etcd.log",
        )
        etcd.start()

        def healthy() -> bool:
            with urllib.request.urlopen(f"{client}/health", timeout=2) as resp:
                return json.load(resp).get("health") == "true"

        etcd.wait_ready(check=healthy, timeout=self.startup_timeout, what="/health true")

    def _start_apiserver(self, *, port: int, etcd_port: int, tokens: Path) -> None:
        pki = self._pki
        assert pki is not None
        self._apiserver = apiserver = ManagedProcess(
            name="kube-apiserver",
            argv=[
                self.bin_dir / "kube-apiserver",
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--tls-cert-file={pki.serving_cert}",
                f"--tls-private-key-file={pki.serving_key}",
                f"--client-ca-file={pki.ca_cert}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=RBAC",
                f"--service-account-issuer={self.url}",
                f"--service-account-key-file={pki.service_account_public_key}",
                f"--service-account-signing-key-file={pki.service_account_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--disable-admission-plugins={','.join(DISABLED_ADMISSION)}",
                "--enable-priority-and-fairness=false",  # lighter; no flow-control objects
                # The "kubernetes" Service endpoint would be 127.0.0.1, which Endpoints validation
                # rejects; with no reconciler the API server does not retry that every 10 s.
                "--endpoint-reconciler-type=none",
                "--profiling=false",
                *self.apiserver_args,
            ],
            log_path=self.workdir / "kube-apiserver.log",
        )
        apiserver.start()
        api = KubeApi(url=self.url, ca_file=pki.ca_cert, token=self.admin_token, timeout=5)

        def ready() -> bool:
            try:
                # /readyz covers etcd and the RBAC bootstrap; pods also need the default namespace,
                # which a post-start hook creates moments later.
                return api.get("/readyz") == "ok" and bool(api.get("/api/v1/namespaces/default"))
            except ApiError:
                return False

        apiserver.wait_ready(check=ready, timeout=self.startup_timeout, what="/readyz ok")

    def stop(self) -> None:
        """Stop schedulers, kube-apiserver and etcd (in that order) and delete everything but logs.

        Idempotent. A second Ctrl-C during teardown kills instead of waiting, and the teardown
        still runs to the end before the interrupt propagates.
        """
        steps = [s.stop for s in self._schedulers]
        steps += [p.stop for p in (self._apiserver, self._etcd) if p is not None]
        steps.append(self._remove_files)
        interrupted: KeyboardInterrupt | None = None
        for step in steps:
            try:
                step()
            except KeyboardInterrupt as err:
                interrupted = err
        if interrupted is not None:
            raise interrupted

    def _remove_files(self) -> None:
        # Only what start() and start_scheduler() write; logs stay (no secrets in them) for
        # post-mortems, and anything else in `workdir` is not ours to delete.
        owned = (
            "pki",
            "tokens.csv",
            "etcd-data",
            "apiserver-certs",
            "kubeconfig*",
            "kube-scheduler-*.yaml",
        )
        for pattern in owned:
            for path in self.workdir.glob(pattern):
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)

    def __enter__(self) -> ControlPlane:
        if self._etcd is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- access ----------------------------------------------------------------------------

    @property
    def api(self) -> KubeApi:
        """A client acting as the admin (system:masters)."""
        if self._api is None:
            self._api = self.api_for(self.admin_token)
        return self._api

    def api_for(self, token: str) -> KubeApi:
        """A client acting as whoever `token` authenticates (or not)."""
        if not self.url:
            raise ControlPlaneError("start() the control plane first")
        return KubeApi(url=self.url, ca_file=self.ca_file, token=token)

    def kubeconfig_for(self, token: str) -> Path:
        """Write (once) and return a kubeconfig that uses `token`."""
        if not self.url:
            raise ControlPlaneError("start() the control plane first")
        path = self.workdir / f"kubeconfig-{hashlib.sha256(token.encode()).hexdigest()[:12]}"
        if not path.exists():
            self._write_kubeconfig(path=path, token=token)
        return path

    def _write_kubeconfig(self, *, path: Path, token: str) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "schedweb-test",
                    "cluster": {"server": self.url, "certificate-authority": str(self.ca_file)},
                }
            ],
            "users": [{"name": "schedweb-test", "user": {"token": token}}],
            "contexts": [
                {
                    "name": "schedweb-test",
                    "context": {"cluster": "schedweb-test", "user": "schedweb-test"},
                }
            ],
            "current-context": "schedweb-test",
        }
        path.touch(mode=0o600)
        path.write_text(yaml.safe_dump(config, sort_keys=False))

    def pids(self) -> dict[str, int]:
        """The pid of every process this control plane started, by name (for leak checks)."""
        found = {p.name: p.pid for p in (self._etcd, self._apiserver) if p and p.started}
        found.update({s.name: s.pid for s in self._schedulers})
        return found

    # -- schedulers ------------------------------------------------------------------------

    def start_scheduler(
        self,
        config_yaml: str | Mapping[str, Any],
        *,
        extra_args: Sequence[str] = (),
        timeout: float | None = None,
        leader_election: bool = False,
    ) -> SchedulerProcess:
        """Start a stock kube-scheduler with this KubeSchedulerConfiguration and wait until ready.

        clientConnection.kubeconfig defaults to the admin kubeconfig; leader election is off
        unless `leader_election` (then the configuration's leaderElection is used as it is).
        Stopped by stop() at the latest; `with cp.start_scheduler(...)` stops it sooner.
        """
        if self._pki is None or not self.url:
            raise ControlPlaneError("start() the control plane first")
        config = scheduler_config(
            config=config_yaml, kubeconfig=self.kubeconfig, leader_election=leader_election
        )
        (port,) = free_ports(count=1)
        scheduler = SchedulerProcess(
            binary=self.bin_dir / "kube-scheduler",
            config=config,
            name=f"kube-scheduler-{next(self._scheduler_numbers)}",
            workdir=self.workdir,
            port=port,
            serving_cert=self._pki.serving_cert,
            serving_key=self._pki.serving_key,
            ca_file=self.ca_file,
            token=self.admin_token,
            kubeconfig=self.kubeconfig,
            extra_args=extra_args,
        )
        self._schedulers.append(scheduler)
        try:
            scheduler.start(timeout=timeout or self.startup_timeout)
        except BaseException:
            scheduler.stop()
            raise
        return scheduler
