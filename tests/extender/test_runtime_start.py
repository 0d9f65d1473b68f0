"""An extender process pays its one-time costs at its start, not in kube-scheduler's first calls."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.redisdb import redis_url

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import django
django.setup()
from celery import current_app
from policies.background import DECISIONS_RECORD
from policies.extender.runtime import runtime
before = DECISIONS_RECORD in current_app.tasks
runtime()
print(before, DECISIONS_RECORD in current_app.tasks)
"""


def test_a_runtime_has_celery_import_the_task_modules_when_it_starts(extender_redis):
    """The first lookup of a task imports every task module and runs Django's system checks
    (about 365 ms of CPU, mostly holding the GIL); the first decisions flush made it while the
    listener answered kube-scheduler's first pods. In a fresh process, as a listener starts."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "schedweb.settings",
        "SCHEDWEB_REDIS_URL": redis_url(12),
        "SCHEDWEB_CLUSTER_SOURCE": "demo",
    }
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    # not imported by Django's set-up, imported by the runtime's start (before any flush)
    assert out.stdout.split() == ["False", "True"]
