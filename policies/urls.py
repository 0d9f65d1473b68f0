"""URLs of the ops endpoints (/healthz, /readyz, /metrics) and the extender's verbs; the pages
are in policies/ui/urls.py, the API in policies/api/urls.py."""

from django.urls import path

from . import ops
from .extender import views as extender

urlpatterns = [
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
    path("metrics", ops.metrics, name="metrics"),
    # kube-scheduler's extender verbs: exact paths, no trailing slash (extender-protocol.md P14).
    path("extender/filter", extender.filter_view),
    path("extender/prioritize", extender.prioritize_view),
    path("extender/preempt", extender.preempt_view),
    path("extender/bind", extender.bind_view),
]
