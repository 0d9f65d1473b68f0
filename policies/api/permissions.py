"""Role checks for API views: each view names the role its methods need."""

from __future__ import annotations

from rest_framework import permissions

from policies.roles import DESCRIPTIONS, has_role, user_role


class RolePermission(permissions.BasePermission):
    """Grants a request when the user holds the view's `required_roles[method]` role or higher.

    Views set `required_roles = {"GET": "viewer", "POST": "editor", ...}`; methods not listed
    need admin. Unauthenticated requests are left to DRF, which answers 401.
    """

    def has_permission(self, request, view) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        needed = getattr(view, "required_roles", {}).get(request.method, "admin")
        if request.method in ("HEAD", "OPTIONS"):
            needed = getattr(view, "required_roles", {}).get("GET", needed)
        if has_role(request.user, needed):
            return True
        held = user_role(request.user)
        self.message = f"this needs the {needed} role ({DESCRIPTIONS[needed]}); " + (
            f"you have the {held} role"
            if held
            else "you have no role: ask an admin to add you to a group"
        )
        return False
