"""`python -m schedweb.metrics_proxy`: the extender's /metrics for Prometheus on a port of its own,
without opening the extender's verbs to the scraper.

The extender's listener asks every client for a certificate of its CA, whatever the path, so a
Prometheus able to scrape it could also call filter, prioritize and bind. This proxy runs beside
the listener in the extender's pod (the chart's `metrics` container): it answers `GET /metrics`
to a bearer token (the file SCHEDWEB_METRICS_TOKEN_FILE, the chart's Secret, compared in constant
time) with what the listener's /metrics answers it over mutual TLS on 127.0.0.1 (schedweb/probe.py,
with the probe's client certificate: both only ever ask the pod's own listener about its health).
Anything else gets 404, a missing or wrong token 401, no answer from the listener 503. It listens
on SCHEDWEB_METRICS_HOST:SCHEDWEB_METRICS_PORT (127.0.0.1:9102); off loopback it refuses to start
without a token. Bounded: 8 requests at once (more are closed unanswered), 10 s to send one, 64 KB
of headers. Standard library only.
"""

from __future__ import annotations

import hmac
import http.client
import http.server
import ipaddress
import logging
import os
import sys
import threading
from pathlib import Path

from schedweb.probe import fetch

log = logging.getLogger("schedweb.metrics_proxy")

MAX_BODY = 4 * 1024 * 1024  # the listener's exposition is a few KB per active policy
CONCURRENCY = 8
SEND_SECONDS = 10.0


class ProxyError(RuntimeError):
    """The proxy's settings do not allow it to start."""


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(environ: os._Environ | dict[str, str]) -> bytes:
    """The bearer token Prometheus presents, from SCHEDWEB_METRICS_TOKEN_FILE (b"" when unset)."""
    path = environ.get("SCHEDWEB_METRICS_TOKEN_FILE", "")
    if not path:
        return b""
    try:
        token = Path(path).read_bytes().strip()
    except OSError as exc:
        raise ProxyError(f"SCHEDWEB_METRICS_TOKEN_FILE={path}: {exc.strerror}") from None
    if len(token) < 16:
        raise ProxyError(f"SCHEDWEB_METRICS_TOKEN_FILE={path}: a token of at least 16 bytes")
    return token


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "schedweb-metrics"
    sys_version = ""
    timeout = SEND_SECONDS  # the socket's: a client that stalls is dropped
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self._answer(404, b"not found\n")
            return
        token = self.server.token  # type: ignore[attr-defined]
        if token:
            given = self.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(given, b"Bearer " + token):
                self._answer(401, b"a bearer token is required\n", {"WWW-Authenticate": "Bearer"})
                return
        try:
            status, body = fetch("/metrics", environ=self.server.environ, limit=MAX_BODY)  # type: ignore[attr-defined]
        except (OSError, http.client.HTTPException) as exc:
            self._answer(503, f"the extender did not answer: {exc}\n".encode())
            return
        if status != 200:
            self._answer(503, f"the extender answered {status}\n".encode())
            return
        self._answer(200, body, {"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    def do_POST(self) -> None:
        self._answer(405, b"GET /metrics only\n", {"Allow": "GET"})

    do_PUT = do_DELETE = do_PATCH = do_POST

    def _answer(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in {"Content-Type": "text/plain", **(headers or {})}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def log_message(self, format: str, *args) -> None:
        log.debug("%s " + format, self.address_string(), *args)


class MetricsProxy(http.server.ThreadingHTTPServer):
    """One thread per request, at most CONCURRENCY at once."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], *, token: bytes, environ) -> None:
        super().__init__(address, _Handler)
        self.token = token
        self.environ = environ
        self._slots = threading.BoundedSemaphore(CONCURRENCY)

    def process_request(self, request, client_address) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def proxy_from(environ: os._Environ | dict[str, str]) -> MetricsProxy:
    """The proxy the environment describes, bound (ProxyError if it may not start)."""
    host = environ.get("SCHEDWEB_METRICS_HOST", "127.0.0.1")
    port = int(environ.get("SCHEDWEB_METRICS_PORT", "9102"))
    token = read_token(environ)
    if not token and not _loopback(host):
        raise ProxyError(
            f"SCHEDWEB_METRICS_HOST={host} is not a loopback address: "
            "set SCHEDWEB_METRICS_TOKEN_FILE (every listener off loopback is authenticated)"
        )
    return MetricsProxy((host, port), token=token, environ=environ)


def main() -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        server = proxy_from(os.environ)
    except (ProxyError, OSError, ValueError) as exc:
        print(f"schedweb.metrics_proxy: {exc}", file=sys.stderr)
        return 2
    log.info("serving the extender's /metrics on %s:%d", *server.server_address[:2])
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
