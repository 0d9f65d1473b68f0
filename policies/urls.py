"""URLs of the ops endpoints (/healthz, /readyz; /metrics is the extender listener's); the pages are in policies/ui/urls.py,
the API in policies/api/urls.py, and the extender's verbs are answered by the ASGI entry
(schedweb/asgi.py) before Django."""

from django.urls import path

from . import ops

urlpatterns = [
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
]
