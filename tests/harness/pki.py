"""Certificates for a loopback control plane, made with the `openssl` CLI (Debian has it; no new
Python dependency): a CA, one serving certificate for 127.0.0.1/localhost shared by
kube-apiserver and kube-scheduler, and the service-account signing key. ECDSA P-256 keys, which
generate in milliseconds where RSA takes a noticeable fraction of a second each."""

from __future__ import annotations

import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_OPENSSL_CONFIG = """\
[req]
distinguished_name = dn
[dn]
[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[serving_ext]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""
_DAYS = "365"


class PkiError(RuntimeError):
    """openssl is missing or refused a step; the message carries its output."""


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files a control plane needs."""

    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    service_account_key: Path  # private: signs tokens (--service-account-signing-key-file)
    service_account_public_key: Path  # verifies them (--service-account-key-file)


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(
        ["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise PkiError(
            f"openssl {args[0]} failed: {result.stderr.strip() or result.stdout.strip()}"
        )


def _ec_key(*, path: Path) -> None:
    _openssl(
        "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path.name,
        cwd=path.parent,
    )  # fmt: skip
    path.chmod(0o600)


def pki_create(*, directory: Path) -> Pki:
    """Write a fresh CA, serving certificate and service-account key into `directory`."""
    if shutil.which("openssl") is None:
        raise PkiError(
            "the openssl command is needed to make test certificates: apt-get install openssl"
        )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "openssl.cnf").write_text(_OPENSSL_CONFIG)
    for name in ("ca.key", "serving.key", "service-account.key"):
        _ec_key(path=directory / name)
    _openssl(
        "pkey", "-in", "service-account.key", "-pubout", "-out", "service-account.pub",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "req", "-config", "openssl.cnf", "-new", "-x509", "-key", "ca.key", "-sha256",
        "-subj", "/CN=schedweb-test-ca", "-days", _DAYS, "-extensions", "ca_ext", "-out", "ca.crt",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "req", "-config", "openssl.cnf", "-new", "-key", "serving.key", "-subj", "/CN=127.0.0.1",
        "-out", "serving.csr",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", "serving.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-sha256",
        "-set_serial", str(secrets.randbits(63) | 1), "-days", _DAYS,
        "-extfile", "openssl.cnf", "-extensions", "serving_ext", "-out", "serving.crt",
        cwd=directory,
    )  # fmt: skip
    return Pki(
        ca_cert=directory / "ca.crt",
        serving_cert=directory / "serving.crt",
        serving_key=directory / "serving.key",
        service_account_key=directory / "service-account.key",
        service_account_public_key=directory / "service-account.pub",
    )
