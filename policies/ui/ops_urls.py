"""URLs of the ops pages (dashboard, sign-in, decisions, connect), included at the site root."""

from django.urls import path

from . import ops_views

urlpatterns = [
    path("", ops_views.dashboard, name="home"),
    path("dashboard/health", ops_views.dashboard_health, name="dashboard-health"),
    path("login/", ops_views.SignInView.as_view(), name="login"),
    path("logout/", ops_views.SignOutView.as_view(), name="logout"),
    path("decisions/", ops_views.decision_list, name="decisions"),
    path("decisions/<int:decision_id>/", ops_views.decision_detail, name="decision"),
    path("connect/", ops_views.connect, name="connect"),
]
