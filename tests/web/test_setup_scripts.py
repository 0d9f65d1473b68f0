"""The set-up scripts fetch through each package client's own registry settings (issue 10): pip,
apt, the go command (module proxy and checksum database) and npm each use their defaults or the
machine's configuration, so a mirror configured for those clients is honoured and no script has
to be edited for it. A URL in a script or in the test harness that downloads could only bypass
that."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
URL = re.compile(r"\b(?:https?|ftp)://([^/\s\"'`)]+)")
LOCAL = {"127.0.0.1", "localhost"}


def _fetching_files() -> list[Path]:
    files = [*sorted((ROOT / "scripts").glob("*.sh")), ROOT / "Makefile", ROOT / ".ci" / "run"]
    files.append(ROOT / "tests" / "engine" / "test_cel_conformance.py")  # runs `go mod download`
    return files


def test_no_set_up_script_names_a_registry_host():
    named = []
    for path in _fetching_files():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in URL.finditer(line):
                host = match.group(1).split(":")[0].split("$")[0]
                if host and host not in LOCAL:
                    named.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)}")
    assert named == []


def test_go_registry_settings_are_left_to_the_go_command():
    for path in _fetching_files():
        text = path.read_text()
        for setting in ("GOPROXY=", "GOSUMDB=", '"GOPROXY":', '"GOSUMDB":'):
            assert setting not in text, f"{path.relative_to(ROOT)} sets {setting.strip('=:')}"
