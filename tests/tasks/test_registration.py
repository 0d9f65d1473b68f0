"""Every task is registered by the worker's own start-up, not by whatever else a process imports.

Before policies/tasks/, `preview_all_pending` lived in policies/ui/jobs.py and reached the
worker's registry only through the URLconf import that Django's system checks happen to do; a
worker started with CELERY_SKIP_CHECKS=1 refused the playground's "Preview all pending pods".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from policies import background

ROOT = Path(__file__).resolve().parents[2]

# What `celery -A schedweb worker` does before it takes messages: set up Django (no system
# checks, no URLconf), then import the app's task modules through autodiscovery.
_WORKER_START = """
import json, sys
import django
django.setup()
from schedweb.celery import app
app.loader.import_default_modules()
registered = sorted(n for n in app.tasks if not n.startswith("celery."))
print(json.dumps({
    "registered": registered,
    "urlconf_loaded": "schedweb.urls" in sys.modules or "policies.ui.policy_views" in sys.modules,
    "beat": sorted(entry["task"] for entry in app.conf.beat_schedule.values()),
}))
"""


def _python(source: str, **env: str) -> dict:
    """Runs `source` in a fresh interpreter (nothing imported yet) and reads its JSON line."""
    out = subprocess.run(
        [sys.executable, "-c", source],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "schedweb.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _worker_view() -> dict:
    return _python(_WORKER_START, CELERY_SKIP_CHECKS="1")


def test_a_worker_knows_every_task_without_loading_the_urlconf():
    view = _worker_view()
    assert not view["urlconf_loaded"]
    names = {
        value
        for key, value in vars(background).items()
        if key.isupper() and isinstance(value, str) and value.startswith("schedweb.")
    }
    assert names  # the constants exist
    assert names <= set(view["registered"]), names - set(view["registered"])
    assert background.PREVIEW_ALL_PENDING in view["registered"]


def test_every_task_has_a_stable_name_and_every_beat_entry_names_a_registered_task():
    view = _worker_view()
    ours = [n for n in view["registered"] if not n.startswith("celery.")]
    assert all(n.startswith("schedweb.") for n in ours), ours  # not module paths
    assert set(view["beat"]) <= set(view["registered"])


# What a web process (uvicorn, manage.py) has: Django set up, the Celery app configured, and no
# worker start-up, so nothing has imported a task module yet.
_WEB_PROCESS = """
import json
import django
django.setup()
from celery import current_app
from policies import background
before = background.PREVIEW_ALL_PENDING in current_app.tasks
found = {name: background.registered_task(name).name for name in (
    background.DISTRIBUTE_ACTIVE_POLICIES, background.DECISIONS_RECORD,
    background.PREVIEW_ALL_PENDING)}
print(json.dumps({"before": before, "found": found}))
"""


def test_a_web_process_finds_the_tasks_it_queues_by_name():
    view = _python(_WEB_PROCESS)
    assert view["before"] is False  # nothing had imported policies.tasks
    assert view["found"] == {name: name for name in view["found"]}
