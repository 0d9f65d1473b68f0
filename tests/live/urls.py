"""The product's URLs plus the cluster routes (which the lead wires into policies/urls.py and
policies/api/urls.py); tests mark themselves with @pytest.mark.urls("tests.live.urls")."""

from django.urls import path

from policies import cluster_views
from schedweb.urls import handler404, handler500  # noqa: F401
from schedweb.urls import urlpatterns as product

urlpatterns = [
    path("cluster/", cluster_views.cluster_page, name="cluster"),
    path("api/v1/cluster", cluster_views.ClusterStatusView.as_view()),
    path("api/v1/cluster/nodes", cluster_views.ClusterNodesView.as_view()),
    path("api/v1/cluster/pods", cluster_views.ClusterPodsView.as_view()),
    *product,
]
