"""From the database's active versions to what extenders read (policies/distribution.py)."""

from __future__ import annotations

from policies.distribution import active_entries_write
from policies.models import PolicyActivation


def active_policies_entries() -> list[dict]:
    """The active version of every policy, as stored in Redis."""
    activations = (
        PolicyActivation.objects.filter(active=True)
        .select_related("policy", "version")
        .order_by("policy__name")
    )
    return [
        {
            "name": a.policy.name,
            "version": a.version.number,
            "document": a.version.document,
            "contentHash": a.version.content_hash,
            "schedulerNames": a.version.scheduler_names,
            "activatedAt": a.activated_at.isoformat(),
        }
        for a in activations
    ]


def active_policies_publish() -> int:
    """Rewrites Redis from the database; returns the new counter."""
    return active_entries_write(active_policies_entries())
