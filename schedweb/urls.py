"""Top-level URL configuration."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from policies.ui.ops_views import admin_sign_in

urlpatterns = [
    path("admin/login/", admin_sign_in),  # throttled like /login/
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="schema", template_name="api_docs.html"),
        name="api-docs",
    ),
    path("api/v1/", include("policies.api.urls")),
    path("", include("policies.ui.urls")),
    path("", include("policies.urls")),
]

handler400 = "policies.ui.errors.bad_request"
handler403 = "policies.ui.errors.permission_denied"
handler404 = "policies.ui.errors.not_found"
handler500 = "policies.ui.errors.server_error"
