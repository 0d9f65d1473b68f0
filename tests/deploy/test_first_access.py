"""First access as NOTES.txt tells it: the chart installed (`helm install --dry-run=server`
against the real test kube-apiserver, which renders NOTES.txt), its migrations Job's command run
with the Job's environment, the web component started with its Deployment's command and
environment (the Secrets' values from the rendered Secrets; only the database, Redis and the
listening address are this machine's), then headless Chromium follows NOTES.txt: the
port-forward's URL, and the first admin's password read from the Secret the command names. A
port-forwarded request arrives with Host 127.0.0.1:<local port>, as here."""

from __future__ import annotations

import http.client
import re
import shlex
import subprocess

import pytest

from tests.deploy.chart import helm_install_dry_run
from tests.e2e.stack import RedisServer
from tests.harness.processes import ManagedProcess, free_ports
from tests.listeners import ROOT, VENV_BIN, listener_env

pytestmark = [pytest.mark.cluster, pytest.mark.browser]

PORT_FORWARD = re.compile(
    r"kubectl -n (?P<ns>\S+) port-forward svc/(?P<service>\S+) (?P<local>\d+):(?P<remote>\d+)\s+"
    r"then (?P<url>http://127\.0\.0\.1:(?P=local)/)"
)
PASSWORD = re.compile(
    r"kubectl -n (?P<ns>\S+) get secret (?P<secret>\S+) -o jsonpath='\{\.data\.(?P<key>[^}]+)\}'"
    r" \| base64 -d"
)
SIGN_IN_AS = re.compile(r"Sign in as (?P<user>\S+), with the password")


def _named(objects, kind: str, name: str) -> dict:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def _env(container: dict, objects: list[dict], **mine: str) -> dict[str, str]:
    """The container's environment: its values, and its Secret references resolved from the
    rendered Secrets; `mine` (the database and Redis of this machine) replaces what it names."""
    env = {}
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = _named(objects, "Secret", ref["name"])["stringData"][ref["key"]]
    return env | mine


def _run(
    command: list[str], env: dict[str, str], *, timeout: float = 300
) -> subprocess.CompletedProcess:
    return subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _get(port: int, path: str, host: str) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("GET", path, headers={"Host": host})
    response = connection.getresponse()
    response.read()
    connection.close()
    return response


def test_notes_lead_to_sign_in_and_the_first_admin_signs_in(control_plane, browser, tmp_path):
    objects, notes = helm_install_dry_run(
        control_plane.kubeconfig, values=["default"], namespace="schedweb"
    )
    forward = PORT_FORWARD.search(notes)
    secret_command = PASSWORD.search(notes)
    assert forward and secret_command and SIGN_IN_AS.search(notes), notes
    assert forward["ns"] == secret_command["ns"] == "schedweb"

    # What NOTES.txt names exists: the web Service, forwarding to the web pods' port...
    service = _named(objects, "Service", forward["service"])
    [port] = service["spec"]["ports"]
    assert port["port"] == int(forward["remote"]) and port["targetPort"] == "http"
    web = _named(objects, "Deployment", f"{forward['service']}")
    [container] = web["spec"]["template"]["spec"]["containers"]
    assert {"name": "http", "containerPort": 8000} in container["ports"]
    # ... and the Secret with the first admin's password, under the key the command reads.
    admin = _named(objects, "Secret", secret_command["secret"])
    password = admin["stringData"][secret_command["key"]]  # what `base64 -d` prints
    assert len(password) >= 12

    redis = RedisServer(tmp_path / "redis").start()
    try:
        here = {
            "SCHEDWEB_DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
            "SCHEDWEB_REDIS_URL": redis.url,
            "SCHEDWEB_METRICS_DIR": str(tmp_path / "metrics"),
        }
        base = listener_env(tmp_path, redis_url=redis.url)
        base = {k: v for k, v in base.items() if not k.startswith("SCHEDWEB_")}
        base["PATH"] = f"{VENV_BIN}:{base.get('PATH', '/usr/bin:/bin')}"
        web_env = base | _env(container, objects, **here)

        # The wait-for-migrations init container would wait: nothing is migrated yet.
        [wait] = web["spec"]["template"]["spec"]["initContainers"]
        check = wait["command"][-1].split("until ", 1)[1].split(" >/dev/null", 1)[0]
        assert _run(shlex.split(check), web_env).returncode != 0

        # The migrations Job: its command, its environment, the admin Secret at its mount.
        [job] = [o for o in objects if o["kind"] == "Job"]
        job_spec = job["spec"]["template"]["spec"]
        [migrate] = job_spec["containers"]
        mounted = tmp_path / "admin"
        mounted.mkdir()
        volume = next(v for v in job_spec["volumes"] if v["name"] == "admin")
        assert volume["secret"]["secretName"] == secret_command["secret"]
        [item] = volume["secret"]["items"]
        (mounted / item["path"]).write_text(admin["stringData"][item["key"]])
        mount = next(m for m in migrate["volumeMounts"] if m["name"] == "admin")["mountPath"]
        command = [part.replace(mount, str(mounted)) for part in migrate["command"]]
        done = _run(command, base | _env(migrate, objects, **here))
        assert done.returncode == 0, done.stdout + done.stderr
        assert password not in done.stdout + done.stderr  # never printed
        assert _run(shlex.split(check), web_env).returncode == 0  # the pods may start now

        # The web container: its command, listening here on a free loopback port.
        local = free_ports(count=1)[0]
        argv = list(container["command"])
        argv[argv.index("--host") + 1] = "127.0.0.1"
        argv[argv.index("--port") + 1] = str(local)
        argv[0] = str(VENV_BIN / argv[0])
        process = ManagedProcess(
            name="web", argv=argv, log_path=tmp_path / "web.log", env=web_env, cwd=ROOT
        )
        process.start()
        try:
            process.wait_ready(
                check=lambda: _get(local, "/healthz", f"127.0.0.1:{local}").status == 200,
                timeout=120,
                what="/healthz through the port-forward's Host",
            )
            # the probes' and in-cluster clients' Host: answered over plain HTTP; any other
            # host refused
            in_cluster = _get(local, "/readyz", "schedweb-web.schedweb.svc:8000")
            assert in_cluster.status == 200
            assert _get(local, "/healthz", "attacker.example").status == 400
            url = forward["url"].replace(f":{forward['local']}/", f":{local}/")
            _sign_in(browser, url, SIGN_IN_AS.search(notes)["user"], password)
        finally:
            process.stop(grace=5)
    finally:
        redis.stop()


def _sign_in(browser, url: str, username: str, password: str) -> None:
    """Chromium (the package's, tests/chromium.py) opens `url`, is sent to the sign-in page (not
    to https://), signs in and lands on the dashboard; the session cookie is Secure, as
    production mode makes it."""
    from tests.browser.looks import WAIT_MS

    context = browser.new_context()
    try:
        context.set_default_timeout(WAIT_MS)
        page = context.new_page()
        page.goto(url)
        page.wait_for_url(re.compile(r"/login/"))
        assert page.url.startswith(url.rstrip("/"))  # still http://127.0.0.1:<port>
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        page.click("#login-form button[type=submit]")
        page.wait_for_url(url)
        assert username in page.locator("#user-menu summary").inner_text()
        session = next(c for c in context.cookies() if c["name"] == "sessionid")
        assert session["secure"] and session["httpOnly"]
    finally:
        context.close()
