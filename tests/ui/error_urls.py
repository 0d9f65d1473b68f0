"""The site's URLconf plus views that fail on purpose, for tests/ui/test_error_pages.py: the
handlers are the site's own (schedweb/urls.py)."""

from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.urls import path

from schedweb.urls import handler400, handler403, handler404, handler500  # noqa: F401
from schedweb.urls import urlpatterns as site


def _boom(request):
    raise RuntimeError("a bug")


def _denied(request):
    raise PermissionDenied


def _suspicious(request):
    raise SuspiciousOperation("a forged header")


urlpatterns = [
    path("_test/boom/", _boom),
    path("_test/denied/", _denied),
    path("_test/suspicious/", _suspicious),
    path("api/v1/_test/boom", _boom),
    *site,
]
