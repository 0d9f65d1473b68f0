"""The worker's side of queue order: create the PriorityClasses the active policies' `queue:`
keys need, and tell the webhook which exist.

    schedweb:queue:classes   JSON [[min, max], ...]   key ranges whose PriorityClasses exist
                                                      (written after they were created or found)

The webhook (policies/admission/review.py) patches a pod only to a class in these ranges: a
class that does not exist would make kube-apiserver's Priority admission refuse the pod even
under failurePolicy Ignore. Classes are never deleted here (a pod may still name one).
"""

from __future__ import annotations

import logging

import orjson

from policies.admission.classes import class_manifest, class_name
from policies.engine.document import PolicyInvalid
from policies.evaluation import policy_compile
from policies.publishing import active_policies_entries
from policies.redis import redis_client
from policies.schedulerconfig import QueuePolicy

log = logging.getLogger(__name__)

CLASSES_KEY = "schedweb:queue:classes"


def _admission_specs():
    """The spec of every active policy with a `queue:` or a `gang:`, in name order."""
    for entry in active_policies_entries():
        try:
            spec = policy_compile(entry["document"]).spec
        except PolicyInvalid:
            continue
        if spec.queue is not None or spec.gang is not None:
            yield spec


def queue_policies_active() -> list[QueuePolicy]:
    """The active policies with a `queue:` or `gang:` (the webhook sets priorities and links
    gang members): one webhook each in the generated configuration."""
    return [QueuePolicy(s.name, s.failure_policy, s.scheduler_names) for s in _admission_specs()]


def queue_ranges_active() -> list[tuple[int, int]]:
    """min..max of every active policy with a `queue:`, merged where they overlap."""
    ranges = [(s.queue.min, s.queue.max) for s in _admission_specs() if s.queue is not None]
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def queue_classes_ensure() -> int:
    """Creates the missing PriorityClasses of the active queue ranges (live cluster only) and
    records the ranges for the webhook; returns how many classes were created."""
    from policies.cluster.live import LiveClient

    ranges = queue_ranges_active()
    client = LiveClient.from_settings()
    existing = client.priority_class_names()
    created = 0
    for low, high in ranges:
        for value in range(low, high + 1):
            if class_name(value) not in existing:
                client.priority_class_create(class_manifest(value))
                created += 1
    queue_classes_record(ranges)
    return created


def queue_classes_record(ranges: list[tuple[int, int]]) -> None:
    """Tells the webhooks which key ranges have their PriorityClasses."""
    redis_client().set(CLASSES_KEY, orjson.dumps([list(r) for r in ranges]))


def queue_classes_read(client) -> tuple[tuple[int, int], ...]:
    """The recorded ranges; () when none are recorded."""
    return queue_classes_parse(client.get(CLASSES_KEY))


def queue_classes_parse(raw: bytes | None) -> tuple[tuple[int, int], ...]:
    """The ranges from the stored JSON (the webhook's refresh thread reads it with MGET)."""
    if not raw:
        return ()
    return tuple((int(low), int(high)) for low, high in orjson.loads(raw))
