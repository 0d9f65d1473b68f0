"""Rollout fixtures: `extender`, this process's extender runtime reporting what it serves, and
`stalled`, a second extender process that confirms nothing (tests/api/test_served.py's), so
that a shadow's publish, promote and discard are waited for as in production."""

from tests.api.test_served import extender, stalled  # noqa: F401
