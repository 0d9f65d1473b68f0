"""URLs of the policies app (pages and ops endpoints)."""

from django.urls import path

from . import cluster_views, ops
from .extender import views as extender
from .ui import gallery

urlpatterns = [
    path("cluster/", cluster_views.cluster_page, name="cluster"),
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
    path("metrics", ops.metrics, name="metrics"),
    # kube-scheduler's extender verbs: exact paths, no trailing slash (extender-protocol.md P14).
    path("extender/filter", extender.filter_view),
    path("extender/prioritize", extender.prioritize_view),
    path("extender/preempt", extender.preempt_view),
    path("extender/bind", extender.bind_view),
    # Component gallery for developers and browser tests; the views answer 404 unless DEBUG.
    path("_dev/components/", gallery.components, name="dev-components"),
    path("_dev/components/preview", gallery.components_preview, name="dev-components-preview"),
]
