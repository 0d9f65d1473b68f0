"""Settings modes: DEBUG off unless asked; the production mode passes `check --deploy` cleanly.

Each case imports the product's settings (schedweb.settings, not the test settings) in a fresh
interpreter with only the environment it names.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = {
    "SCHEDWEB_SECRET_KEY": "p" * 20 + "-a-long-random-production-key-" + "q" * 30,
    "SCHEDWEB_HTTPS": "1",
    "SCHEDWEB_BEHIND_PROXY": "1",
    "SCHEDWEB_ALLOWED_HOSTS": "schedweb.example.com",
}


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "schedweb.settings", **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _debug(env: dict[str, str]) -> str:
    done = _run(["-c", "import schedweb.settings as s; print(s.DEBUG)"], env)
    return done.stdout.strip() or done.stderr.strip().splitlines()[-1]


def test_debug_is_off_unless_asked():
    assert _debug({"SCHEDWEB_SECRET_KEY": "k"}) == "False"
    assert _debug({"SCHEDWEB_DEBUG": "1"}) == "True"
    # Off, the key is required: no start with the known development key.
    assert "SCHEDWEB_SECRET_KEY is required" in _debug({})


def test_production_settings_pass_check_deploy_with_no_warning():
    done = _run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], PRODUCTION)
    assert done.returncode == 0, done.stderr
    assert "System check identified no issues (1 silenced)." in done.stdout, done.stdout
    assert "WARNINGS" not in done.stdout + done.stderr


def test_local_settings_do_warn_so_the_check_above_can_fail():
    local = {k: v for k, v in PRODUCTION.items() if k != "SCHEDWEB_HTTPS"}
    done = _run(["manage.py", "check", "--deploy"], local)
    for code in ("W004", "W008", "W012", "W016"):
        assert f"security.{code}" in done.stderr, done.stderr


def test_production_cookies_hsts_and_proxy_header():
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, "
        "s.SECURE_HSTS_SECONDS, s.SECURE_PROXY_SSL_HEADER)"
    )
    done = _run(["-c", code], PRODUCTION)
    assert done.stdout.split() == [
        "True",
        "True",
        "True",
        "31536000",
        "('HTTP_X_FORWARDED_PROTO',",
        "'https')",
    ], done.stderr


INTERNAL = {
    **PRODUCTION,
    "SCHEDWEB_INTERNAL_HOSTS": "127.0.0.1,localhost,schedweb-web.ops.svc",
    "SCHEDWEB_DATABASE_URL": "sqlite:///:memory:",
}


def test_with_internal_hosts_check_deploy_stays_clean():
    done = _run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], INTERNAL)
    assert done.returncode == 0, done.stderr
    # W021 (preload) as above, and W008: the redirect is on, made by schedweb's middleware
    assert "System check identified no issues (2 silenced)." in done.stdout, done.stdout


def test_internal_hosts_are_served_over_plain_http_and_every_other_host_is_redirected():
    """A port-forward (Host 127.0.0.1:8000) and the Service's own name get answers over plain
    HTTP; the public name is redirected to HTTPS, and answered over HTTPS (the proxy's header)
    with HSTS; a host in neither list is refused."""
    code = """
import django; django.setup()
from django.test import Client
c = Client()
def show(host, **extra):
    r = c.get("/login/?next=/", HTTP_HOST=host, **extra)
    print(host, r.status_code, r.get("Location", "-"), "hsts" if r.has_header("Strict-Transport-Security") else "-")
show("127.0.0.1:8000")
show("localhost:8000")
show("schedweb-web.ops.svc:8000")
show("schedweb.example.com")
show("schedweb.example.com", HTTP_X_FORWARDED_PROTO="https")
show("evil.example.com")
"""
    done = _run(["-c", code], INTERNAL)
    assert done.stdout.splitlines() == [
        "127.0.0.1:8000 200 - -",
        "localhost:8000 200 - -",
        "schedweb-web.ops.svc:8000 200 - -",
        "schedweb.example.com 301 https://schedweb.example.com/login/?next=/ -",
        "schedweb.example.com 200 - hsts",
        "evil.example.com 400 - -",
    ], done.stderr
    without = _run(["-c", code], PRODUCTION)  # no internal hosts: Django's redirect, for all
    assert "127.0.0.1:8000 400 - -" in without.stdout.splitlines(), without.stderr


def test_every_answer_carries_the_csp(client, db):
    csp = client.get("/login/")["Content-Security-Policy"]
    assert "script-src 'self' 'unsafe-eval';" in csp
    assert "object-src 'none'" in csp and "frame-ancestors 'none'" in csp


def test_no_template_has_an_inline_script_the_csp_would_block():
    """script-src has no 'unsafe-inline': only <script src=...> and JSON data blocks."""
    import re

    offenders = []
    for path in (ROOT / "templates").rglob("*.html"):
        text = path.read_text()
        for tag in re.findall(r"<script\b[^>]*>", text):
            if "src=" not in tag and 'type="application/json"' not in tag:
                offenders.append(f"{path.relative_to(ROOT)}: {tag}")
        # Inline event handlers (onclick="...") are inline scripts too.
        for handler in re.findall(r"<[a-z][^>]*\son[a-z]+=", text):
            offenders.append(f"{path.relative_to(ROOT)}: {handler}")
    assert offenders == []


def test_the_api_docs_page_has_no_inline_script(client, db):
    import re

    page = client.get("/api/docs/")
    assert page.status_code == 200
    tags = re.findall(r"<script\b[^>]*>", page.content.decode())
    assert tags and all("src=" in tag for tag in tags), tags
    assert client.get("/api/docs/?script=")["Content-Type"].startswith("application/javascript")
