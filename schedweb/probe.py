"""`python -m schedweb.probe PATH`: the extender pod's own liveness and readiness check.

The kubelet's HTTPS probes present no client certificate, and under mutual TLS the extender's
handshake requires one, so in a cluster the probe runs inside the pod (an exec probe) with a
client certificate of the extender's CA (SCHEDWEB_PROBE_CERT / _KEY): GET https://127.0.0.1:
<SCHEDWEB_EXTENDER_PORT><PATH> with SNI and Host set to SCHEDWEB_PROBE_HOST (a name of the server
certificate and of SCHEDWEB_EXTENDER_ALLOWED_HOSTS). Exit status 0 on a 200, 1 otherwise, with
the reason on stderr. Standard library only: no Django start-up on every probe.
"""

from __future__ import annotations

import http.client
import os
import ssl
import sys


class _LoopbackConnection(http.client.HTTPSConnection):
    """HTTPS to 127.0.0.1, verifying the certificate against `server_name` (it names the
    Service, not the loopback address)."""

    def __init__(self, *, port: int, server_name: str, context: ssl.SSLContext) -> None:
        super().__init__("127.0.0.1", port, timeout=5, context=context)
        self.server_name = server_name

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self.server_name)


def fetch(
    path: str, *, environ: os._Environ | dict[str, str] = os.environ, limit: int = 300
) -> tuple[int, bytes]:
    """GET `path` from the extender's listener in this pod, as the probe: (status, at most
    `limit` bytes of the body). OSError or HTTPException when there is no answer."""
    port = int(environ.get("SCHEDWEB_EXTENDER_PORT", "8443"))
    host = environ.get("SCHEDWEB_PROBE_HOST", "localhost")
    context = ssl.create_default_context(
        cafile=environ.get("SCHEDWEB_PROBE_CA") or environ.get("SCHEDWEB_EXTENDER_CLIENT_CA")
    )
    if environ.get("SCHEDWEB_PROBE_CERT"):
        context.load_cert_chain(environ["SCHEDWEB_PROBE_CERT"], environ.get("SCHEDWEB_PROBE_KEY"))
    connection = _LoopbackConnection(port=port, server_name=host, context=context)
    try:
        connection.request("GET", path, headers={"Host": host})
        response = connection.getresponse()
        return response.status, response.read(limit)
    finally:
        connection.close()


def probe(path: str, *, environ: os._Environ | dict[str, str] = os.environ) -> str:
    """ "" when the extender answers 200 at `path`, else why not."""
    try:
        status, body = fetch(path, environ=environ)
    except (OSError, http.client.HTTPException) as exc:
        return f"{path}: {exc}"
    return "" if status == 200 else f"{path}: HTTP {status} {body.decode(errors='replace')}"


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "/healthz"
    reason = probe(path)
    if reason:
        print(reason, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
