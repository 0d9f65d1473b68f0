"""The extender's own listener: `python -m schedweb.extender_server` serves
schedweb.asgi:extender_application with uvicorn on SCHEDWEB_EXTENDER_HOST:SCHEDWEB_EXTENDER_PORT.

With SCHEDWEB_EXTENDER_TLS_CERT/_TLS_KEY it speaks TLS; with SCHEDWEB_EXTENDER_CLIENT_CA too, the
handshake requires a client certificate issued by that CA (mutual TLS): a client without one never
gets to send a request. Without a certificate it speaks plain HTTP, which the settings allow on a
loopback address only (schedweb/settings.py refuses anything else at start). The certificate,
its key and the client CA are reloaded when their files change (schedweb/tls_reload.py): a
renewed certificate is served from the next handshake on, without a restart.
"""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile
from collections.abc import Callable

from schedweb.tls_reload import reloading_ssl_context


def uvicorn_options() -> dict:
    """uvicorn.run keyword arguments from the settings."""
    from django.conf import settings

    options: dict = {
        "host": settings.SCHEDWEB_EXTENDER_HOST,
        "port": settings.SCHEDWEB_EXTENDER_PORT,
        "workers": settings.SCHEDWEB_EXTENDER_WORKERS,
        # uvloop and httptools, with deadlines for clients that stall in the TLS handshake, the
        # headers or the body (schedweb/http_timeouts.py), and kube-scheduler's filter and
        # prioritize calls answered from the parser, without an ASGI cycle
        # (schedweb/extender_http.py).
        "loop": "schedweb.http_timeouts:new_event_loop",
        "http": "schedweb.extender_http:ExtenderHttpProtocol",
        "lifespan": "on",
        "timeout_keep_alive": 30,
        "access_log": False,  # two requests per pod: noise, and time on the hot path
        # With several workers, uvicorn's supervisor kills a worker that does not answer its
        # ping within this time; loading a large snapshot (5000 nodes, 50000 pods) holds the
        # GIL for longer than uvicorn's 5 s on a busy machine, and every restarted worker
        # loaded it again: the listener never came up.
        "timeout_worker_healthcheck": 120,
    }
    if settings.SCHEDWEB_EXTENDER_TLS_CERT:
        options["ssl_certfile"] = str(settings.SCHEDWEB_EXTENDER_TLS_CERT)
        options["ssl_keyfile"] = str(settings.SCHEDWEB_EXTENDER_TLS_KEY)
        options["ssl_context_factory"] = reloading_ssl_context
    if settings.SCHEDWEB_EXTENDER_CLIENT_CA:
        options["ssl_ca_certs"] = str(settings.SCHEDWEB_EXTENDER_CLIENT_CA)
        options["ssl_cert_reqs"] = ssl.CERT_REQUIRED
    return options


def metrics_dir_for_workers() -> str | None:
    """Empties SCHEDWEB_METRICS_DIR, or makes a private temporary one and passes it to the
    workers through the environment (before Django reads its settings): each worker writes its
    counters there and /metrics adds them up (policies/extender/metrics.py). Returns the
    temporary directory to remove at exit, if one was made."""
    from policies.extender.metrics import metrics_dir_prepare

    made = None
    directory = os.environ.get("SCHEDWEB_METRICS_DIR", "")
    if not directory:
        directory = made = tempfile.mkdtemp(prefix="schedweb-extender-metrics-")
        os.environ["SCHEDWEB_METRICS_DIR"] = directory
    metrics_dir_prepare(os.path.expanduser(directory))
    return made


def main(prepare: Callable[[], None] | None = None) -> None:
    """Serves until stopped; `prepare` runs once Django is set up, before the listener starts
    (bench/passthrough.py replaces the verbs there)."""
    import django
    import uvicorn

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "schedweb.settings")
    made = metrics_dir_for_workers()
    try:
        django.setup()
        if prepare is not None:
            prepare()
        uvicorn.run("schedweb.asgi:extender_application", **uvicorn_options())
    finally:
        if made:
            shutil.rmtree(made, ignore_errors=True)


if __name__ == "__main__":
    main()
