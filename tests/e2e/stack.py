"""The whole product as separate processes, for end-to-end tests and benchmarks.

uvicorn (the web app and the extender), a Celery worker with beat (cluster watcher, policy
distribution, decisions) and a private redis-server, all on 127.0.0.1, pointed at a real
kube-apiserver. Tests drive it over HTTP like users and kube-scheduler do.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.harness.processes import ManagedProcess, free_ports

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


class StackError(RuntimeError):
    """A part of the stack did not start or answer."""


class RedisServer:
    """A private redis-server (tests stop and restart it)."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.workdir = workdir
        self.port = port or free_ports(count=1)[0]
        self.process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            raise StackError("redis-server is not installed (scripts/bootstrap.sh installs it)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.process = ManagedProcess(
            name="redis-server",
            argv=[
                binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            log_path=self.workdir / "redis.log",
        )
        self.process.start()
        self.process.wait_ready(check=self._ping, timeout=60, what="PING")
        return self

    def _ping(self) -> bool:
        import socket

        with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(grace=3)
            self.process = None


class SchedwebStack:
    """Web (uvicorn: pages, API) + the extender's own listener + worker (Celery with beat) against
    `kubeconfig`, with its own database.

    `tls`: "mtls" (the default, as `make run`: server certificate and client certificates of a
    local CA required), "tls" (server certificate only) or "plain" (HTTP on loopback). The
    certificates are made by scripts/extender-certs.sh in workdir/tls.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        kubeconfig: Path,
        redis: RedisServer,
        web_workers: int = 2,
        tls: str = "mtls",
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.redis = redis
        self.port, self.extender_port = free_ports(count=2)
        self.url = f"http://127.0.0.1:{self.port}"
        self.tls_dir = workdir / "tls"
        self.tls = tls
        scheme = "http" if tls == "plain" else "https"
        self.extender_url = f"{scheme}://127.0.0.1:{self.extender_port}"
        self.web_workers = web_workers
        self.env = {
            "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(workdir),
            "PYTHONPATH": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "schedweb.settings",
            "SCHEDWEB_DEBUG": "0",
            "SCHEDWEB_SECRET_KEY": "e2e-not-secret",
            "SCHEDWEB_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "SCHEDWEB_DATABASE_URL": f"sqlite:///{workdir / 'db.sqlite3'}",
            "SCHEDWEB_REDIS_URL": redis.url,
            "SCHEDWEB_KUBECONFIG": str(kubeconfig),
            "SCHEDWEB_CLUSTER_SOURCE": "live",
            "SCHEDWEB_CLUSTER_NAME": "e2e",
            "SCHEDWEB_EXTENDER_URL": f"{self.extender_url}/extender/",
            "SCHEDWEB_EXTENDER_PORT": str(self.extender_port),
            "SCHEDWEB_EXTENDER_WORKERS": str(web_workers),
            "SCHEDWEB_LOG_LEVEL": "WARNING",
            **self._tls_env(tls),
            **(extra_env or {}),
        }
        self.web: ManagedProcess | None = None
        self.extender: ManagedProcess | None = None
        self.worker: ManagedProcess | None = None
        self.token = ""
        # The last publish, rollback or deactivation's `served`: which extender processes
        # confirmed serving it before the answer (issue 24).
        self.served: dict[str, Any] = {}

    def _tls_env(self, tls: str) -> dict[str, str]:
        if tls == "plain":
            return {}
        subprocess.run([str(ROOT / "scripts/extender-certs.sh"), str(self.tls_dir)], check=True)
        env = {
            "SCHEDWEB_EXTENDER_TLS_CERT": str(self.tls_dir / "server.crt"),
            "SCHEDWEB_EXTENDER_TLS_KEY": str(self.tls_dir / "server.key"),
            "SCHEDWEB_EXTENDER_SCHEDULER_CA": str(self.tls_dir / "ca.crt"),
        }
        if tls == "mtls":
            env["SCHEDWEB_EXTENDER_CLIENT_CA"] = str(self.tls_dir / "ca.crt")
            env["SCHEDWEB_EXTENDER_SCHEDULER_CERT"] = str(self.tls_dir / "client.crt")
            env["SCHEDWEB_EXTENDER_SCHEDULER_KEY"] = str(self.tls_dir / "client.key")
        return env

    def ssl_context(self, *, client_cert: bool = True) -> ssl.SSLContext | None:
        """A client context trusting the local CA, presenting kube-scheduler's certificate."""
        if self.tls == "plain":
            return None
        context = ssl.create_default_context(cafile=str(self.tls_dir / "ca.crt"))
        if client_cert:
            context.load_cert_chain(self.tls_dir / "client.crt", self.tls_dir / "client.key")
        return context

    def manage(self, *args: str) -> str:
        result = subprocess.run(
            [str(VENV_BIN / "python"), str(ROOT / "manage.py"), *args],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode != 0:
            raise StackError(
                f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
            )
        return result.stdout

    def start(self) -> SchedwebStack:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.manage("migrate", "--noinput", "-v0")
        out = self.manage("adduser", "e2e", "--role", "admin", "--token", "e2e")
        self.token = next(
            line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("token: ")
        )
        self.start_worker()
        self.start_extender(wait_for_snapshot=False)
        self.start_web()
        return self

    def start_worker(self) -> None:
        self.worker = ManagedProcess(
            name="celery-worker",
            argv=[
                VENV_BIN / "celery",
                "-A",
                "schedweb",
                "worker",
                "-B",
                "--loglevel=INFO",
                "--concurrency=2",
                "--schedule",
                str(self.workdir / "beat-schedule"),
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            log_path=self.workdir / "worker.log",
            env=self.env,
            cwd=ROOT,
        )
        self.worker.start()

    def start_web(self, *, wait_for_snapshot: bool = True) -> None:
        self.web = ManagedProcess(
            name="uvicorn",
            argv=[  # as scripts/run.sh starts it, without the access log
                VENV_BIN / "uvicorn",
                "schedweb.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                str(self.web_workers),
                "--loop",
                "uvloop",
                "--http",
                "schedweb.http_timeouts:TimedHttpToolsProtocol",
                "--lifespan",
                "on",
                "--no-access-log",
                "--timeout-graceful-shutdown",
                "2",
            ],
            log_path=self.workdir / "web.log",
            env=self.env,
            cwd=ROOT,
        )
        self.web.start()
        self.web.wait_ready(
            check=lambda: self._ready(wait_for_snapshot),
            timeout=120,
            what="/readyz with a snapshot",
        )

    def start_extender(self, *, wait_for_snapshot: bool = True) -> None:
        """The extender's listener, as scripts/run.sh starts it."""
        self.extender = ManagedProcess(
            name="extender",
            argv=[VENV_BIN / "python", "-m", "schedweb.extender_server"],
            log_path=self.workdir / "extender.log",
            env=self.env,
            cwd=ROOT,
        )
        self.extender.start()
        self.extender.wait_ready(
            check=lambda: self._ready(wait_for_snapshot, extender=True),
            timeout=120,
            what="the extender's /readyz",
        )

    def start_extender_replica(self) -> ExtenderReplica:
        """One more extender listener on a port of its own, same settings and Redis: what a
        second replica of the chart's extender Deployment is. The caller stops it."""
        (port,) = free_ports(count=1)
        env = {
            **self.env,
            "SCHEDWEB_EXTENDER_PORT": str(port),
            "SCHEDWEB_EXTENDER_URL": f"https://127.0.0.1:{port}/extender/",
        }
        process = ManagedProcess(
            name=f"extender-{port}",
            argv=[VENV_BIN / "python", "-m", "schedweb.extender_server"],
            log_path=self.workdir / f"extender-{port}.log",
            env=env,
            cwd=ROOT,
        )
        replica = ExtenderReplica(stack=self, port=port, process=process)
        process.start()
        process.wait_ready(
            check=lambda: replica.request("GET", "/readyz")[0] in (200, 503),
            timeout=120,
            what="the replica's /readyz",
        )
        return replica

    def stop_extender(self) -> None:
        if self.extender is not None:
            self.extender.stop(grace=5)
            self.extender = None

    def _ready(self, want_snapshot: bool, *, extender: bool = False) -> bool:
        try:
            ask = self.extender_request if extender else self.request
            status, body = ask("GET", "/readyz")
        except (urllib.error.URLError, OSError):
            return False
        if not want_snapshot:
            return status in (200, 503)
        return body.get("checks", {}).get("snapshot") == "ok"

    def stop_web(self) -> None:
        if self.web is not None:
            self.web.stop(grace=5)
            self.web = None

    def stop(self) -> None:
        self.stop_web()
        self.stop_extender()
        if self.worker is not None:
            self.worker.stop(grace=10)
            self.worker = None

    def request(
        self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        for key, value in (headers or {}).items():
            request.add_header(key, value)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                raw = response.read()
                status = response.status
        except urllib.error.HTTPError as exc:
            raw, status = exc.read(), exc.code
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def extender_request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        client_cert: bool = True,
        base: str = "",
    ) -> tuple[int, Any]:
        """A request to the extender's listener (kube-scheduler's certificate unless told not);
        `base` another listener's https://127.0.0.1:<port>."""
        data = None if body is None else json.dumps(body).encode()
        url = (base or self.extender_url) + path
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        context = self.ssl_context(client_cert=client_cert)
        try:
            with urllib.request.urlopen(request, timeout=30, context=context) as response:
                raw, status = response.read(), response.status
        except urllib.error.HTTPError as exc:
            raw, status = exc.read(), exc.code
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def publish(
        self, document: str, message: str = "e2e", *, shadow: bool = False, canary=None
    ) -> int:
        """Creates or updates the policy named in `document` and publishes it (`shadow`: as
        the shadow of its active version; `canary`: as a canary, the REST `canary` object;
        issue 25); returns the version."""
        import yaml

        name = yaml.safe_load(document)["name"]
        status, body = self.request("GET", f"/api/v1/policies/{name}")
        if status == 404:
            status, body = self.request("POST", "/api/v1/policies", {"document": document})
            if status != 201:
                raise StackError(f"creating {name}: {status} {body}")
        else:
            status, body = self.request(
                "PUT",
                f"/api/v1/policies/{name}",
                {"document": document},
                headers={"If-Match": body["etag"]},
            )
            if status != 200:
                raise StackError(f"saving {name}: {status} {body}")
        status, body = self.request(
            "POST",
            f"/api/v1/policies/{name}/publish",
            {"message": message, "shadow": shadow, **({"canary": canary} if canary else {})},
            headers={"If-Match": body["etag"]},  # the revision just created or saved
        )
        if status != 201:
            raise StackError(f"publishing {name}: {status} {body}")
        self.served = body["served"]
        return body["version"]["number"]

    def rollback(self, name: str, version: int) -> None:
        """Activates `version` of `name` again (the REST call a pipeline makes)."""
        status, body = self.request(
            "POST", f"/api/v1/policies/{name}/rollback", {"version": version}
        )
        if status != 200:
            raise StackError(f"rolling {name} back to v{version}: {status} {body}")
        self.served = body["served"]

    def deactivate(self, name: str) -> None:
        status, body = self.request("POST", f"/api/v1/policies/{name}/deactivate")
        if status != 200:
            raise StackError(f"deactivating {name}: {status} {body}")
        self.served = body["served"]

    def wait_serving(
        self, name: str, version: int, *, base: str = "", timeout: float = 60.0
    ) -> float:
        """Seconds until every extender worker answers with `name/v<version>` (its /readyz)."""
        label = f"{name}/v{version}"
        return self.wait_workers(
            lambda health: label in health.get("policies", {}).values(),
            what=f"{label} served",
            base=base,
            timeout=timeout,
        )

    def wait_snapshot(self, version: int, *, timeout: float = 60.0) -> float:
        """Seconds until every extender worker holds snapshot `version` or a later one."""
        return self.wait_workers(
            lambda health: (health.get("snapshot") or {}).get("version", 0) >= version,
            what=f"snapshot v{version}",
            timeout=timeout,
        )

    def wait_workers(
        self, check: Callable[[dict], bool], *, what: str, base: str = "", timeout: float = 60.0
    ) -> float:
        """Seconds until `check` holds for the /readyz `extender` part of every worker process of
        the extender listener (`base`, else the stack's). Each answer names its worker (pid), so
        this waits for each one's last answer, not for a run of answers that luck spreads."""
        start = time.monotonic()
        latest: dict[int, bool] = {}  # worker pid -> whether its last answer passed `check`
        problem = ""
        while True:
            try:
                _, body = self.extender_request("GET", "/readyz", base=base)
            except (urllib.error.URLError, OSError) as exc:  # a replica starting or stopping
                body, problem = None, str(exc)
            health = body.get("extender") if isinstance(body, dict) else None
            if isinstance(health, dict) and "pid" in health:
                latest[health["pid"]] = bool(check(health))
                if sum(latest.values()) >= self.web_workers:
                    return time.monotonic() - start
            if time.monotonic() - start > timeout:
                raise StackError(
                    f"{what}: not by all {self.web_workers} extender workers within {timeout} s"
                    f" (by worker pid: {latest}; last answer: {body or problem})"
                )
            time.sleep(0.05)

    def scheduler_config(self, *extra: str) -> str:
        """`manage.py schedulerconfig` for this stack, with the kube-apiserver's admin kubeconfig."""
        return self.manage(
            "schedulerconfig",
            "--url",
            f"{self.extender_url}/extender/",
            "--no-leader-elect",
            "--kubeconfig",
            self.env["SCHEDWEB_KUBECONFIG"],
            *extra,
        )


class ExtenderReplica:
    """A further extender listener of a SchedwebStack (start_extender_replica)."""

    def __init__(self, *, stack: SchedwebStack, port: int, process: ManagedProcess) -> None:
        self.stack = stack
        self.port = port
        self.process = process
        self.url = f"https://127.0.0.1:{port}"

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        try:
            return self.stack.extender_request(method, path, body, base=self.url)
        except (urllib.error.URLError, OSError):
            return 0, None

    def served(self) -> dict[str, str]:
        """The policy versions this replica answers with (its /readyz), by scheduler name."""
        _, body = self.request("GET", "/readyz")
        return body.get("extender", {}).get("policies", {}) if isinstance(body, dict) else {}

    def stop(self) -> None:
        self.process.stop(grace=5)
