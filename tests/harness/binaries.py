"""Where scripts/k8s-binaries.sh put etcd, kube-apiserver and kube-scheduler, and whether they
match tests/harness/go.mod. The tests only look: building is the script's job."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
MODULE_DIR = REPO_ROOT / "tests" / "harness"
BUILD_SCRIPT = "scripts/k8s-binaries.sh"
NAMES = ("etcd", "kube-apiserver", "kube-scheduler")


class BinariesMissing(RuntimeError):
    """The control-plane binaries are absent or were built from another go.mod."""


def binaries_version(*, module_dir: Path = MODULE_DIR) -> str:
    """The k8s.io/kubernetes version pinned in go.mod, e.g. "v1.35.8"."""
    go_mod = (module_dir / "go.mod").read_text()
    match = re.search(
        r"^\s*(?:require\s+)?k8s\.io/kubernetes (v\d+\.\d+\.\d+)\b", go_mod, re.MULTILINE
    )
    if match is None:
        raise BinariesMissing(f"{module_dir / 'go.mod'} does not require k8s.io/kubernetes")
    return match.group(1)


def binaries_stamp(*, module_dir: Path = MODULE_DIR) -> str:
    """sha256 of go.mod + go.sum, the same stamp the build script writes (`cat | sha256sum`)."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((module_dir / name).read_bytes())
    return digest.hexdigest()


def binaries_find(*, root: Path = REPO_ROOT, module_dir: Path = MODULE_DIR) -> Path:
    """The folder holding all three binaries, built from the current go.mod and go.sum."""
    folder = root / ".cache" / "k8s" / binaries_version(module_dir=module_dir)
    missing = [name for name in NAMES if not (folder / name).is_file()]
    if missing:
        raise BinariesMissing(
            f"{', '.join(missing)} not found in {folder}: run {BUILD_SCRIPT} first "
            "(the first build takes several minutes)"
        )
    stamp_path = folder / ".stamp"
    stamp = stamp_path.read_text().strip() if stamp_path.is_file() else ""
    if stamp != binaries_stamp(module_dir=module_dir):
        raise BinariesMissing(
            f"the binaries in {folder} were built from another tests/harness/go.mod or go.sum: "
            f"run {BUILD_SCRIPT} to rebuild them"
        )
    return folder
