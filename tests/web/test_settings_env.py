"""Settings helpers fail loudly and name the variable; database URLs map onto Django settings."""

from pathlib import Path

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured

from schedweb.env import database_from_url, env_bool, env_int, env_list, env_str

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_required_variable_names_itself(monkeypatch):
    monkeypatch.delenv("SCHEDWEB_NOPE", raising=False)
    with pytest.raises(ImproperlyConfigured, match="SCHEDWEB_NOPE is required"):
        env_str("SCHEDWEB_NOPE")


def test_an_empty_required_variable_counts_as_missing(monkeypatch):
    monkeypatch.setenv("SCHEDWEB_NOPE", "")
    with pytest.raises(ImproperlyConfigured, match="SCHEDWEB_NOPE"):
        env_str("SCHEDWEB_NOPE")


@pytest.mark.parametrize(
    ("raw", "expected"), [("1", True), ("yes", True), ("off", False), ("0", False)]
)
def test_booleans_accept_common_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv("SCHEDWEB_FLAG", raw)
    assert env_bool("SCHEDWEB_FLAG", not expected) is expected


def test_a_malformed_value_is_refused_with_its_name(monkeypatch):
    monkeypatch.setenv("SCHEDWEB_FLAG", "perhaps")
    monkeypatch.setenv("SCHEDWEB_COUNT", "ten")
    with pytest.raises(ImproperlyConfigured, match="SCHEDWEB_FLAG='perhaps' is not a boolean"):
        env_bool("SCHEDWEB_FLAG", False)
    with pytest.raises(ImproperlyConfigured, match="SCHEDWEB_COUNT='ten' is not an integer"):
        env_int("SCHEDWEB_COUNT", 1)


def test_lists_are_comma_separated(monkeypatch):
    monkeypatch.setenv("SCHEDWEB_HOSTS", "a, b,,c ")
    assert env_list("SCHEDWEB_HOSTS", []) == ["a", "b", "c"]


def test_database_urls_cover_sqlite_and_postgres():
    base = Path("/srv/app")
    assert database_from_url("sqlite:///db.sqlite3", base_dir=base)["NAME"] == "/srv/app/db.sqlite3"
    assert database_from_url("sqlite:////tmp/x.db", base_dir=base)["NAME"] == "/tmp/x.db"
    pg = database_from_url("postgres://u:p%40ss@db.local:6543/name?sslmode=require", base_dir=base)
    assert (pg["ENGINE"], pg["USER"], pg["PASSWORD"], pg["HOST"], pg["PORT"], pg["NAME"]) == (
        "django.db.backends.postgresql",
        "u",
        "p@ss",
        "db.local",
        "6543",
        "name",
    )
    assert pg["OPTIONS"] == {"sslmode": "require"}
    with pytest.raises(ImproperlyConfigured, match="unsupported scheme 'mysql'"):
        database_from_url("mysql://x/y", base_dir=base)


def test_docker_compose_defines_the_services_on_loopback_only():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert set(compose["services"]) == {"web", "extender", "worker", "beat", "redis", "postgres"}
    for service in compose["services"].values():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), port
    # the extender: its own port, TLS with a client CA (off loopback in its container)
    extender = compose["services"]["extender"]
    assert extender["command"] == "python -m schedweb.extender_server"
    env = extender["environment"]
    assert env["SCHEDWEB_EXTENDER_HOST"] == "0.0.0.0"
    assert {"SCHEDWEB_EXTENDER_TLS_CERT", "SCHEDWEB_EXTENDER_CLIENT_CA"} <= set(env)
    assert "extender_server" not in compose["services"]["web"]["command"]


def test_every_setting_read_from_the_environment_is_in_env_example():
    import re

    read = set(
        re.findall(r'env_\w+\(\s*"(SCHEDWEB_\w+)"', (ROOT / "schedweb/settings.py").read_text())
    )
    documented = set(re.findall(r"^# (SCHEDWEB_\w+)=", (ROOT / ".env.example").read_text(), re.M))
    assert read and read <= documented, f"missing from .env.example: {sorted(read - documented)}"


WORKER_FLAGS = ("--without-gossip", "--without-mingle", "--without-heartbeat")


def _worker_command_lines() -> dict[str, str]:
    """Every Celery worker command line the project ships or tests with, by where it is."""
    run_sh = (ROOT / "scripts" / "run.sh").read_text().replace("\\\n", " ")
    lines = {
        f"scripts/run.sh: {line.strip()[:40]}": line
        for line in run_sh.splitlines()
        if "celery" in line and " worker" in line and not line.lstrip().startswith("#")
    }
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name, service in compose["services"].items():
        command = service.get("command", "")
        if isinstance(command, str) and "celery" in command and " worker" in command:
            lines[f"docker-compose.yml: {name}"] = command
    stack = (ROOT / "tests" / "e2e" / "stack.py").read_text()
    start = stack.index("def start_worker")
    lines["tests/e2e/stack.py: start_worker"] = stack[start : stack.index("def ", start + 1)]
    return lines


def test_every_worker_runs_without_gossip_mingle_and_event_heartbeats():
    # Nothing in schedweb consumes worker events (no inspect, no Flower); gossip logged ERROR
    # tracebacks on every Redis restart (issue 14).
    lines = _worker_command_lines()
    assert len(lines) == 3, sorted(lines)  # run.sh, compose's worker, the e2e stack
    for where, line in lines.items():
        missing = [flag for flag in WORKER_FLAGS if flag not in line]
        assert not missing, f"{where} starts a worker with {missing} missing"
