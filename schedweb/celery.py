"""The Celery application, configured from Django settings (CELERY_* names)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "schedweb.settings")

app = Celery("schedweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Periodic work (beat):
# - keep one cluster watcher running (source live);
# - requeue pods a policy rejected that would now pass (policies/requeue.py);
# - rewrite the published set in Redis from the database (a flushed or restarted Redis has it
#   back within a minute);
# - record where decided pods were bound.
app.conf.beat_schedule = {
    "cluster-watch-supervise": {
        "task": "policies.cluster_tasks.cluster_watch_supervise",
        "schedule": 15.0,
    },
    "requeue-unblocked-pods": {
        "task": "policies.tasks.pods_requeue_unblocked",
        "schedule": 2.0,
        "options": {"expires": 4.0},
    },
    "distribute-active-policies": {
        "task": "policies.tasks.distribute_active_policies",
        "schedule": 60.0,
    },
    "resolve-decision-nodes": {"task": "policies.tasks.decisions_resolve_chosen", "schedule": 30.0},
}
