"""`--shuffle-within-files SEED`: each file's tests in an order shuffled by SEED.

A test that passes only when another ran before it (or only when it runs first) fails under some
seed. Files keep their order, and so do the runs pytest-django makes (transactional tests last,
as Django orders them): only each run of consecutive tests from one file is shuffled.
scripts/stress-test.sh passes it through PYTEST_ADDOPTS.
"""

from __future__ import annotations

import random

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shuffle-within-files",
        metavar="SEED",
        type=int,
        default=None,
        help="shuffle the tests of each file by SEED (files keep their order)",
    )


@pytest.hookimpl(trylast=True)  # after pytest's and pytest-django's own reordering
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seed = config.getoption("--shuffle-within-files")
    if seed is None:
        return
    shuffled: list[pytest.Item] = []
    start = 0
    for end in range(1, len(items) + 1):
        if end == len(items) or items[end].path != items[start].path:
            run = items[start:end]
            random.Random(f"{seed}:{items[start].nodeid}").shuffle(run)
            shuffled += run
            start = end
    items[:] = shuffled


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = config.getoption("--shuffle-within-files")
    return None if seed is None else f"tests shuffled within files, seed {seed}"
