"""The product's URLs (the cluster routes are in policies/ui/urls.py and policies/api/urls.py);
tests mark themselves with @pytest.mark.urls("tests.cluster.urls")."""

from schedweb.urls import handler404, handler500, urlpatterns  # noqa: F401
