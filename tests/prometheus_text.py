"""Prometheus's text format (version 0.0.4), checked independently of the code that writes it."""

from __future__ import annotations

import re

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_VALUE = r"(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]Inf|NaN)"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
_SAMPLE = re.compile(rf"^({_NAME})(?:\{{((?:{_LABEL})(?:,{_LABEL})*)?\}})? ({_VALUE})$")
_TYPE = re.compile(rf"^# TYPE ({_NAME}) (counter|gauge|histogram|summary|untyped)$")
_HELP = re.compile(rf"^# HELP ({_NAME}) .*$")


def assert_valid_exposition(text: str) -> None:
    """Every line a HELP, TYPE or sample line; each family typed once, before its samples;
    counters end in _total; histogram buckets cumulative up to +Inf, which equals _count."""
    assert text.endswith("\n")
    types: dict[str, str] = {}
    seen_samples: set[str] = set()
    buckets: dict[str, list[tuple[str, float]]] = {}
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if match := _TYPE.match(line):
            name, kind = match.groups()
            assert name not in types and name not in seen_samples, line
            types[name] = kind
            continue
        if _HELP.match(line):
            continue
        match = _SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        name, labels, value = match.groups()
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        kind = types.get(name) or types.get(family)
        assert kind, f"sample before its TYPE: {line!r}"
        seen_samples.add(family)
        if kind == "counter":
            assert name.endswith("_total") and float(value) >= 0, line
        if kind == "histogram":
            series = re.sub(r',?le="[^"]*"', "", labels or "")
            if name.endswith("_bucket"):
                bound = re.search(r'le="([^"]*)"', labels).group(1)
                buckets.setdefault(f"{family}{{{series}}}", []).append((bound, float(value)))
            elif name.endswith("_count"):
                counts[f"{family}{{{series}}}"] = float(value)
    assert buckets, "no histogram"
    for series, points in buckets.items():
        values = [v for _, v in points]
        assert values == sorted(values), series
        assert points[-1][0] == "+Inf" and points[-1][1] == counts[series], series


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample line as (name, labels, value)."""
    found = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        name, labels, value = match.groups()
        pairs = re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"', labels or "")
        found.append((name, dict(pairs), float(value)))
    return found
