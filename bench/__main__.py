"""Run the benchmarks: `python -m bench [engine ...]` (all when none is named)."""

from __future__ import annotations

import os
import platform
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "schedweb.settings")
os.environ.setdefault("SCHEDWEB_SECRET_KEY", "bench-only-key")  # DEBUG is off unless asked

SUITES = [
    "engine",
    "snapshot",
    "scale",
    "push",
    "extender",
    "differential",
    "playground",
    "admission",
    "backtest",
    "sizing",
    "shadow",
]


def main(argv: list[str]) -> int:
    chosen = argv or SUITES
    unknown = [name for name in chosen if name not in SUITES]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(SUITES)}")
        return 2
    print(
        f"schedweb benchmarks on {platform.node()} ({os.cpu_count()} cores, Python {platform.python_version()})"
    )
    import django

    django.setup()  # the suites use the product's modules, models included, as a process would
    for name in chosen:
        module = __import__(f"bench.{name}", fromlist=["run"])
        module.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
