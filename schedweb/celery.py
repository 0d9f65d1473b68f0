"""The Celery application, configured from Django settings (CELERY_* names)."""

import os

from celery import Celery, bootsteps
from celery.beat import PersistentScheduler

from schedweb.liveness import heartbeat_file, touch

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "schedweb.settings")

app = Celery("schedweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()  # imports policies.tasks, which registers every task


class Heartbeat(bootsteps.StartStopStep):
    """The worker's liveness (schedweb/liveness.py): touches SCHEDWEB_LIVENESS_FILE every
    SCHEDWEB_LIVENESS_SECONDS from the worker's event loop, where the consumer runs."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker, **kwargs) -> None:
        super().__init__(worker, **kwargs)
        self.path = heartbeat_file()
        self.every = float(os.environ.get("SCHEDWEB_LIVENESS_SECONDS", "10"))
        self.entry = None

    def start(self, worker) -> None:
        if self.path is not None:
            touch(self.path)
            self.entry = worker.timer.call_repeatedly(self.every, touch, (self.path,))

    def stop(self, worker) -> None:
        if self.entry is not None:
            self.entry.cancel()


class BeatScheduler(PersistentScheduler):
    """Celery's default scheduler, touching SCHEDWEB_LIVENESS_FILE at every tick (`celery beat
    --scheduler schedweb.celery:BeatScheduler`)."""

    def tick(self, *args, **kwargs):
        touch()
        return super().tick(*args, **kwargs)


app.steps["worker"].add(Heartbeat)

# Periodic work (beat):
# - keep one cluster watcher running (source live);
# - requeue pods a policy rejected that would now pass (policies/extender/requeue.py);
# - rewrite the published set in Redis from the database (a flushed or restarted Redis has it
#   back within a minute);
# - create the PriorityClasses of the active policies' queue keys (policies/queue_classes.py);
# - detect the Workload API and create the Workloads of linked gangs (policies/gangs.py);
# - record where decided pods were bound, and forget decisions past their retention;
# - add the model's kube-scheduler pick under both versions to recent shadow records (issue 25).
app.conf.beat_schedule = {
    # a canary's tripped guard the queue lost, and its quiet period (issue 25)
    "canary-check": {"task": "schedweb.canary_check", "schedule": 5.0, "options": {"expires": 10}},
    "cluster-watch-supervise": {
        "task": "schedweb.cluster_watch_supervise",
        "schedule": 15.0,
    },
    "requeue-unblocked-pods": {
        "task": "schedweb.pods_requeue_unblocked",
        "schedule": 2.0,
        "options": {"expires": 4.0},
    },
    "distribute-active-policies": {
        "task": "schedweb.distribute_active_policies",
        "schedule": 60.0,
    },
    "queue-classes-ensure": {"task": "schedweb.queue_classes_ensure", "schedule": 60.0},
    "gang-workloads-ensure": {
        "task": "schedweb.gang_workloads_ensure",
        "schedule": 2.0,
        "options": {"expires": 4.0},
    },
    "resolve-decision-nodes": {"task": "schedweb.decisions_resolve_chosen", "schedule": 30.0},
    "prune-decisions": {"task": "schedweb.decisions_prune", "schedule": 3600.0},
    # every 30 s, as resolve-decision-nodes (both catch the worker's snapshot up): at every 5 s
    # it was a third of the worker's CPU under bench shadow's churn, most of the shadow's cost
    # outside the lane
    "shadow-picks": {
        "task": "schedweb.shadow_picks",
        "schedule": 30.0,
        "options": {"expires": 60.0},
    },
    "prune-shares": {"task": "schedweb.shares_prune", "schedule": 3600.0},
}


def _survive_a_lost_broker_with_unacked_messages() -> None:
    """Keeps the worker alive when Redis goes away while a delivered message is not yet acked.

    kombu 5.7's Redis transport then closes the channel and restores such messages through a
    connection that is already gone; the AttributeError ('NoneType' object has no attribute
    'hostname') escapes Celery's connection-error handling and the worker exits ("Unrecoverable
    error"). A task delivered on that channel and finished after the worker reconnected is acked
    (CELERY_TASK_ACKS_LATE) through the same dead channel, with the same end ('NoneType' object
    has no attribute 'client'). Redis still holds such a message in its `unacked` hash and kombu
    restores it after the visibility timeout (a Redis that lost its data has nothing to
    restore), so a restore or an ack that cannot run is logged and skipped. Reproduced by
    tests/e2e/test_broker.py; seen in tests/e2e/test_resilience.py.
    """
    import logging
    from collections.abc import Callable
    from typing import Any

    from kombu.transport import redis as transport

    log = logging.getLogger(__name__)

    def connection_gone(qos) -> bool:
        return getattr(qos.channel.connection, "client", None) is None

    def guarded(original, what: str | Callable[[Any], str]):
        if getattr(original, "schedweb_guarded", False):
            return original

        def call(self, *args, **kwargs):
            try:
                return original(self, *args, **kwargs)
            except AttributeError:
                if not connection_gone(self):
                    raise  # not the lost-connection case
                log.warning(
                    "broker connection lost: %s; Redis redelivers the unacknowledged message(s)"
                    " after the visibility timeout",
                    what(self) if callable(what) else what,
                )
                return None

        call.schedweb_guarded = True
        return call

    transport.QoS.restore_unacked = guarded(
        transport.QoS.restore_unacked,
        lambda qos: f"{len(qos._delivered)} unacknowledged message(s) not restored",
    )
    transport.QoS.ack = guarded(transport.QoS.ack, "a finished task's ack not sent")
    transport.QoS.reject = guarded(transport.QoS.reject, "a task's reject not sent")


_survive_a_lost_broker_with_unacked_messages()
