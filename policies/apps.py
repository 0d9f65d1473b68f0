"""Django app configuration for policies."""

from django.apps import AppConfig


class PoliciesConfig(AppConfig):
    name = "policies"
    default_auto_field = "django.db.models.BigAutoField"
