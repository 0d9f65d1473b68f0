"""WSGI entry point, for those who deploy with a WSGI server (make run and docker-compose serve
schedweb.asgi with uvicorn).

kube-scheduler's extender calls (POST /extender/<verb>) go straight to the extender, skipping
Django's middleware and URL resolution: they need none of it (no session, CSRF, auth or
templates) and it is a measurable share of a hot-path request. Everything else, including
non-POST requests to /extender/ (405), is served by Django.
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "schedweb.settings")
django_application = get_wsgi_application()

from policies.extender.views import wsgi_extender  # noqa: E402  (needs Django set up first)


def application(environ, start_response):
    if environ.get("REQUEST_METHOD") == "POST" and environ.get("PATH_INFO", "").startswith(
        "/extender/"
    ):
        answered = wsgi_extender(environ, start_response)
        if answered is not None:
            return answered
    return django_application(environ, start_response)
