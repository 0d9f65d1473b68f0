"""The extender listener reloads its server certificate and client CA when the mounted files
change (schedweb/tls_reload.py): the next handshake presents the new certificate and accepts only
clients of the new CA, a call in flight on an older connection completes, and the process is the
same one throughout. The files are swapped as the kubelet swaps a Secret volume's (a `..data`
symlink renamed onto a new directory), between two sets of certificates from
scripts/extender-certs.sh, each with its own CA."""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from schedweb.tls_reload import ReloadingContext, files_stamp
from tests.e2e.stack import RedisServer
from tests.listeners import ROOT, start_extender

BODY = orjson.dumps(
    {
        "Pod": {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {}},
        "NodeNames": ["cp-1"],
    }
)
FILES = {"tls.crt": "server.crt", "tls.key": "server.key", "ca.crt": "ca.crt"}


def _issue(directory: Path) -> Path:
    subprocess.run([ROOT / "scripts" / "extender-certs.sh", str(directory)], check=True)
    return directory


class SecretVolume:
    """A directory laid out as the kubelet mounts a Secret: tls.crt -> ..data/tls.crt, and
    `..data` a symlink to the current version's directory, replaced by one rename."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()
        self.versions = 0
        for name in FILES:
            (root / name).symlink_to(Path("..data") / name)

    def project(self, files: dict[str, bytes]) -> None:
        self.versions += 1
        version = self.root / f"..v{self.versions}"
        version.mkdir()
        for name, data in files.items():
            (version / name).write_bytes(data)
        staging = self.root / "..data_tmp"
        staging.symlink_to(version.name)
        os.replace(staging, self.root / "..data")

    def project_set(self, certs: Path) -> None:
        self.project({name: (certs / source).read_bytes() for name, source in FILES.items()})


def _client_context(certs: Path) -> ssl.SSLContext:
    """A client trusting `certs`' CA, presenting its client certificate."""
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    context.load_cert_chain(str(certs / "client.crt"), str(certs / "client.key"))
    return context


def _fingerprint(der: bytes) -> str:
    return hashlib.sha256(der).hexdigest()


def _file_fingerprint(path: Path) -> str:
    return _fingerprint(ssl.PEM_cert_to_DER_cert(path.read_text()))


def _get(port: int, certs: Path, path: str = "/healthz") -> tuple[int, str]:
    """GET over a new connection with `certs`' client; (status, the server certificate's hash)."""
    connection = http.client.HTTPSConnection(
        "127.0.0.1", port, timeout=30, context=_client_context(certs)
    )
    try:
        connection.request("GET", path, headers={"Host": "localhost"})
        response = connection.getresponse()
        response.read()
        return response.status, _fingerprint(connection.sock.getpeercert(binary_form=True))
    finally:
        connection.close()


@pytest.fixture
def listener(tmp_path):
    """The extender listener over mutual TLS from a Secret-like volume holding set "old"."""
    old, new = _issue(tmp_path / "old"), _issue(tmp_path / "new")
    volume = SecretVolume(tmp_path / "tls")
    volume.project_set(old)
    redis = RedisServer(tmp_path / "redis").start()
    try:
        process, port = start_extender(
            tmp_path,
            redis_url=redis.url,
            ca_file=str(old / "ca.crt"),
            client=(str(old / "client.crt"), str(old / "client.key")),
            SCHEDWEB_EXTENDER_WORKERS="1",
            SCHEDWEB_EXTENDER_TLS_CERT=str(volume.root / "tls.crt"),
            SCHEDWEB_EXTENDER_TLS_KEY=str(volume.root / "tls.key"),
            SCHEDWEB_EXTENDER_CLIENT_CA=str(volume.root / "ca.crt"),
        )
        try:
            yield {"process": process, "port": port, "old": old, "new": new, "volume": volume}
        finally:
            process.stop(grace=5)
    finally:
        redis.stop()


def _refused(port: int, certs: Path) -> bool:
    """True when a new connection presenting `certs`' client certificate gets no answer (the
    server refuses the certificate: in TLS 1.3 the client learns it at its first read)."""
    client = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    client.load_cert_chain(str(certs / "client.crt"), str(certs / "client.key"))
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE  # whichever server certificate: the question is the client's
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=30) as raw,
            client.wrap_socket(raw, server_hostname="localhost") as sock,
        ):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            return not sock.recv(100).startswith(b"HTTP/1.1 200")
    except (ssl.SSLError, ConnectionError):
        return True


def test_a_renewed_certificate_is_served_from_the_next_handshake_without_a_restart(listener):
    port, old, new, volume = (listener[k] for k in ("port", "old", "new", "volume"))
    pid = listener["process"].pid
    assert _get(port, old)[1] == _file_fingerprint(old / "server.crt")

    # A call in flight: its headers and half its body sent over the old connection.
    in_flight = _client_context(old).wrap_socket(
        socket.create_connection(("127.0.0.1", port), timeout=60), server_hostname="localhost"
    )
    head = (
        "POST /extender/filter HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n"
    ).encode()
    in_flight.sendall(head + BODY[: len(BODY) // 2])

    volume.project_set(new)

    # The next handshake: the new server certificate, the new CA's clients only.
    status, served = _get(port, new)
    assert status == 200 and served == _file_fingerprint(new / "server.crt")
    assert _refused(port, old)

    # The call in flight completes on its connection, which then answers another request.
    in_flight.sendall(BODY[len(BODY) // 2 :])
    answer = in_flight.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    in_flight.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    deadline = time.monotonic() + 60
    again = b""
    while b"HTTP/1.1 200" not in again and time.monotonic() < deadline:
        again += in_flight.recv(65536)
    assert b"HTTP/1.1 200" in again
    in_flight.close()
    assert listener["process"].pid == pid and listener["process"].exit_code() is None


def test_files_that_do_not_load_leave_the_last_certificate_in_use_until_fixed(listener):
    port, old, new, volume = (listener[k] for k in ("port", "old", "new", "volume"))
    # A rotation caught half-way: the new certificate with the old key.
    volume.project(
        {
            "tls.crt": (new / "server.crt").read_bytes(),
            "tls.key": (old / "server.key").read_bytes(),
            "ca.crt": (old / "ca.crt").read_bytes(),
        }
    )
    status, served = _get(port, old)
    assert status == 200 and served == _file_fingerprint(old / "server.crt")
    volume.project_set(new)
    status, served = _get(port, new)
    assert status == 200 and served == _file_fingerprint(new / "server.crt")
    log = listener["process"].log_path.read_text()
    assert "do not load" in log and "reloaded the server certificate" in log


def _server_context(certs: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(certs / "tls.crt"), str(certs / "tls.key"))
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(str(certs / "ca.crt"))
    return context


def test_the_context_is_rebuilt_only_when_the_files_change(tmp_path):
    old, new = _issue(tmp_path / "old"), _issue(tmp_path / "new")
    volume = SecretVolume(tmp_path / "tls")
    volume.project_set(old)
    builds = []

    def build() -> ssl.SSLContext:
        builds.append(1)
        return _server_context(volume.root)

    entry = _server_context(volume.root)
    reloading = ReloadingContext(
        entry=entry, build=build, paths=[volume.root / name for name in FILES]
    )
    assert entry.sni_callback is not None
    assert reloading.current() is entry and reloading.current() is entry and builds == []
    volume.project_set(new)
    renewed = reloading.current()
    assert renewed is not entry and reloading.current() is renewed and len(builds) == 1
    # A broken projection is tried once, then not again until the files change.
    volume.project({"tls.crt": b"not a certificate", "tls.key": b"", "ca.crt": b""})
    assert reloading.current() is renewed and reloading.current() is renewed
    assert len(builds) == 2 and reloading.reloads == 1


def test_a_missing_file_has_a_stamp_of_its_own(tmp_path):
    path = tmp_path / "tls.crt"
    missing = files_stamp([path])
    path.write_text("x")
    present = files_stamp([path])
    assert missing == (None,) and present[0] is not None
    shutil.copy(path, tmp_path / "copy")
    os.replace(tmp_path / "copy", path)  # same bytes, new inode: a new projection
    assert files_stamp([path]) != present
