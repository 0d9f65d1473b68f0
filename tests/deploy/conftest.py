"""The live-cluster fixtures of tests/cluster (an isolated Redis database, unique names, watchers
in threads), shared with the chart's live RBAC tests, and the package's Chromium."""

from collections.abc import Iterator

import pytest

from tests.chromium import chromium
from tests.cluster.conftest import (  # noqa: F401  (pytest finds fixtures by name here)
    cluster_name,
    live_redis,
    names,
    run_watcher,
)


@pytest.fixture(scope="package")
def browser() -> Iterator[object]:
    """One Chromium for the first-access test, closed before the next package (tests/chromium.py)."""
    with chromium() as opened:
        yield opened
