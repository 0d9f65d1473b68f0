"""Rollout fixtures: `extender`, this process's extender runtime reporting what it serves (the
one tests/api/test_served.py uses), so that a shadow's publish, promote and discard are waited
for as in production."""

from tests.api.test_served import extender  # noqa: F401
