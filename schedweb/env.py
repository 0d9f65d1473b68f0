"""Typed readers for settings that come from the environment.

Each helper fails loudly: a required variable that is missing, or a value of the wrong
shape, raises ImproperlyConfigured naming the variable, so a bad deployment stops at start
instead of misbehaving later (the healthchecks `hc/settings.py` habit).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

_REQUIRED = object()
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _raw(name: str, default: object) -> str | None:
    value = os.environ.get(name)
    if value is None or (value == "" and default is _REQUIRED):
        if default is _REQUIRED:
            raise ImproperlyConfigured(
                f"The environment variable {name} is required but not set (or empty)."
            )
        return None
    return value


def env_str(name: str, default: object = _REQUIRED) -> str:
    """A string; `default` is returned when the variable is unset."""
    value = _raw(name, default)
    return default if value is None else value  # type: ignore[return-value]


def env_bool(name: str, default: bool) -> bool:
    """A boolean spelled 1/0, true/false, yes/no or on/off."""
    value = _raw(name, default)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use 1/0, true/false).")


def env_int(name: str, default: int) -> int:
    """An integer."""
    value = _raw(name, default)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer.") from None


def env_float(name: str, default: float) -> float:
    """A number."""
    value = _raw(name, default)
    if value is None:
        return default
    try:
        return float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number.") from None


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list; blanks are dropped."""
    value = _raw(name, default)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_path(name: str, default: Path | None) -> Path | None:
    """A filesystem path with `~` expanded; empty means unset."""
    value = _raw(name, default)
    if value is None or value == "":
        return default if value is None else None
    return Path(value).expanduser()


def database_from_url(url: str, *, base_dir: Path) -> dict:
    """Django DATABASES['default'] from `sqlite:///path` or `postgres://user:pw@host:port/db`."""
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        path = unquote(parsed.path[1:] if parsed.path.startswith("//") else parsed.path.lstrip("/"))
        if url.startswith("sqlite:////"):
            path = "/" + path.lstrip("/")
        name = Path(path) if Path(path).is_absolute() else base_dir / path
        # IMMEDIATE transactions take the write lock at BEGIN, so concurrent publishes serialise
        # instead of failing half-way with "database is locked"; WAL lets readers continue.
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(name),
            # Tests use a file, not the shared-cache in-memory database: its table-level locks
            # fail at once ("database table is locked") instead of honouring the busy timeout,
            # which would make concurrency tests meaningless.
            "TEST": {
                "NAME": os.path.join(tempfile.gettempdir(), f"schedweb-test-{os.getpid()}.sqlite3")
            },
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    if parsed.scheme in ("postgres", "postgresql"):
        options = dict(parse_qsl(parsed.query))
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")),
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "127.0.0.1",
            "PORT": str(parsed.port or 5432),
            "OPTIONS": options,
            "CONN_MAX_AGE": 60,
        }
    raise ImproperlyConfigured(
        f"SCHEDWEB_DATABASE_URL={url!r}: unsupported scheme {parsed.scheme!r} (use sqlite:/// or postgres://)."
    )
