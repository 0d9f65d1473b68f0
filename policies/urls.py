"""URLs of the policies app (pages and ops endpoints)."""

from django.urls import path

from . import cluster_views, devviews, ops

urlpatterns = [
    path("cluster/", cluster_views.cluster_page, name="cluster"),
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
    path("metrics", ops.metrics, name="metrics"),
    # Component gallery for developers and browser tests; the views answer 404 unless DEBUG.
    path("_dev/components/", devviews.components, name="dev-components"),
    path("_dev/components/preview", devviews.components_preview, name="dev-components-preview"),
]
