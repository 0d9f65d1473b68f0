"""The extender listener's settings: TLS, mutual TLS, and plain HTTP on loopback only."""

from __future__ import annotations

import ssl
import subprocess
import sys

from schedweb.extender_server import uvicorn_options
from schedweb.tls_reload import reloading_ssl_context

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _settings_error(**env: str) -> str:
    """Import the settings with `env`; the ImproperlyConfigured message, or "" when none."""
    code = "import schedweb.settings"
    base = {"PATH": "/usr/bin:/bin", "SCHEDWEB_SECRET_KEY": "x", "SCHEDWEB_DEBUG": "0"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    return "" if done.returncode == 0 else done.stderr.strip().splitlines()[-1]


def test_plain_http_is_for_loopback_only():
    assert _settings_error(SCHEDWEB_EXTENDER_HOST="127.0.0.1") == ""
    assert "loopback only" in _settings_error(SCHEDWEB_EXTENDER_HOST="0.0.0.0")
    assert (
        _settings_error(
            SCHEDWEB_EXTENDER_HOST="0.0.0.0",
            SCHEDWEB_EXTENDER_TLS_CERT="/x/cert.pem",
            SCHEDWEB_EXTENDER_TLS_KEY="/x/key.pem",
        )
        == ""
    )


def test_bind_off_loopback_needs_mutual_tls():
    tls = {"SCHEDWEB_EXTENDER_TLS_CERT": "/x/c.pem", "SCHEDWEB_EXTENDER_TLS_KEY": "/x/k.pem"}
    wide = {**tls, "SCHEDWEB_EXTENDER_HOST": "0.0.0.0", "SCHEDWEB_EXTENDER_BIND": "1"}
    assert "needs mutual TLS" in _settings_error(**wide)
    assert _settings_error(**wide, SCHEDWEB_EXTENDER_CLIENT_CA="/x/ca.pem") == ""
    assert _settings_error(SCHEDWEB_EXTENDER_BIND="1") == ""  # loopback


def test_mutual_tls_needs_a_server_certificate():
    assert "needs" in _settings_error(SCHEDWEB_EXTENDER_CLIENT_CA="/x/ca.pem")
    assert "go together" in _settings_error(SCHEDWEB_EXTENDER_TLS_CERT="/x/cert.pem")


def test_uvicorn_options_follow_the_settings(settings, tmp_path):
    settings.SCHEDWEB_EXTENDER_TLS_CERT = None
    settings.SCHEDWEB_EXTENDER_TLS_KEY = None
    settings.SCHEDWEB_EXTENDER_CLIENT_CA = None
    plain = uvicorn_options()
    assert plain["host"] == "127.0.0.1" and "ssl_certfile" not in plain
    assert plain["workers"] == settings.SCHEDWEB_EXTENDER_WORKERS
    # With several workers, uvicorn's supervisor restarts one that does not answer within this
    # time: a 5000-node, 50000-pod snapshot load took longer than its default 5 s (issue 13).
    assert plain["timeout_worker_healthcheck"] >= 60
    settings.SCHEDWEB_EXTENDER_TLS_CERT = tmp_path / "cert.pem"
    settings.SCHEDWEB_EXTENDER_TLS_KEY = tmp_path / "key.pem"
    tls = uvicorn_options()
    assert tls["ssl_certfile"] == str(tmp_path / "cert.pem") and "ssl_ca_certs" not in tls
    # the files are reloaded when they change (tests/web/test_extender_cert_reload.py)
    assert tls["ssl_context_factory"] is reloading_ssl_context
    settings.SCHEDWEB_EXTENDER_CLIENT_CA = tmp_path / "ca.pem"
    mutual = uvicorn_options()
    assert mutual["ssl_ca_certs"] == str(tmp_path / "ca.pem")
    assert mutual["ssl_cert_reqs"] == ssl.CERT_REQUIRED


def test_the_default_url_follows_tls_and_the_port():
    code = "from schedweb import settings; print(settings.SCHEDWEB_EXTENDER_URL)"
    base = {"PATH": "/usr/bin:/bin", "SCHEDWEB_SECRET_KEY": "x", "SCHEDWEB_DEBUG": "0"}
    tls = {"SCHEDWEB_EXTENDER_TLS_CERT": "/x/c.pem", "SCHEDWEB_EXTENDER_TLS_KEY": "/x/k.pem"}
    for env, url in (
        ({}, "http://127.0.0.1:8443/extender/"),
        ({**tls, "SCHEDWEB_EXTENDER_PORT": "9443"}, "https://127.0.0.1:9443/extender/"),
    ):
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={**base, **env},
            capture_output=True,
            text=True,
            check=True,
        )
        assert done.stdout.strip() == url


def test_one_uvicorn_worker_by_default():
    """kube-scheduler calls one pod at a time: a second worker would only apply snapshot
    changes, on the cores kube-scheduler needs (issue 13)."""
    code = "from schedweb import settings; print(settings.SCHEDWEB_EXTENDER_WORKERS)"
    base = {"PATH": "/usr/bin:/bin", "SCHEDWEB_SECRET_KEY": "x", "SCHEDWEB_DEBUG": "0"}
    for env, workers in (({}, "1"), ({"SCHEDWEB_EXTENDER_WORKERS": "3"}, "3")):
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env={**base, **env},
            capture_output=True,
            text=True,
            check=True,
        )
        assert done.stdout.strip() == workers
