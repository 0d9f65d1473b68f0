"""Roles: viewer < editor < publisher < admin, held as Django groups of those names.

Each role includes the ones before it. Superusers are admins. A user in no role group can log in
but sees nothing (403 everywhere).
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

ROLES = ("viewer", "editor", "publisher", "admin")
_RANK = {role: rank for rank, role in enumerate(ROLES)}

# What each role may do, for messages ("publishing needs the publisher role").
DESCRIPTIONS = {
    "viewer": "read policies, versions, previews, the cluster, decisions and the audit log",
    "editor": "also create and edit drafts and test cases, and run previews",
    "publisher": "also publish, roll back and deactivate policies",
    "admin": "also delete policies and manage other users' API tokens",
}


def user_role(user: AbstractBaseUser | AnonymousUser | None) -> str | None:
    """The highest role of `user`, or None."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    if user.is_superuser:
        return "admin"
    cached = getattr(user, "_schedweb_role", False)
    if cached is not False:
        return cached
    names = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    role = max(names, key=_RANK.__getitem__) if names else None
    user._schedweb_role = role  # per request: users are loaded per request
    return role


def has_role(user, role: str) -> bool:
    """True when `user` holds `role` or a higher one."""
    held = user_role(user)
    return held is not None and _RANK[held] >= _RANK[role]
