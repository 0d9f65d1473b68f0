"""Every Celery task of schedweb, registered by importing its module here.

Celery's autodiscovery imports this package in the worker and in web processes alike, so each
task is known wherever it is queued, whatever else was imported (the URLconf included). Tasks
are thin: they take ids or small values, call one service and keep retries and time limits.
Writers queue them by name (policies/background.py) and never import this package.
"""

from policies.tasks import canary, cluster, decisions, distribution, previews, requeue, shares

__all__ = ["canary", "cluster", "decisions", "distribution", "previews", "requeue", "shares"]
