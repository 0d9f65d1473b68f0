"""The bundled example policies and pods (policies/examples/), as the UI offers them.

The "New policy" dialog lists the example policies with their descriptions and comment headers;
the playground's pod picker offers the example pods. Files are read once per process.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import yaml

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"
PODS_DIR = EXAMPLES_DIR / "pods"

BLANK_POLICY = """\
# A new policy. Filters reject nodes (first failure wins); scores rank the nodes that pass:
# each is normalized to 0..100 and weighted; the extender answers round(total / 10).
name: {name}
description: Say what this policy does and why.
schedulerNames: [schedweb]          # pods with another spec.schedulerName pass through untouched
failurePolicy: Ignore               # an evaluation error on a node: Ignore (pass, score 0) or Fail
variables:
  - name: freeCpu
    expression: node.allocatable.cpu - node.requested.cpu
filters:
  - name: enough-cpu
    expression: variables.freeCpu >= pod.requests.cpu
    message: '"needs " + string(pod.requests.cpu) + "m CPU, " + string(variables.freeCpu) + "m free"'
scores:
  - name: most-free-cpu
    # (free - request) * 100 / allocatable: 4000m node, 1000m used, pod 500m -> 2500*100/4000 = 62
    expression: >-
      node.allocatable.cpu > 0 ?
      (variables.freeCpu - pod.requests.cpu) * 100 / node.allocatable.cpu : 0
    weight: 1
    normalize: none
"""


@dataclass(frozen=True)
class ExamplePolicy:
    """An example policy file: its document name, description and comment header."""

    key: str  # the file's stem, e.g. "bin-packing"
    name: str
    description: str
    notes: str  # the leading comment block, without "# "
    text: str


@dataclass(frozen=True)
class ExamplePod:
    """An example pod manifest for previews."""

    key: str
    name: str
    namespace: str
    scheduler_name: str
    notes: str
    text: str


def _comment_header(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:].removeprefix(" "))
    return "\n".join(lines)


@functools.cache
def example_policies() -> tuple[ExamplePolicy, ...]:
    """Every example policy, sorted by file name."""
    found = []
    for path in sorted(EXAMPLES_DIR.glob("*.yaml")):
        text = path.read_text()
        data = yaml.safe_load(text) or {}
        found.append(
            ExamplePolicy(
                key=path.stem,
                name=str(data.get("name", path.stem)),
                description=str(data.get("description", "")),
                notes=_comment_header(text),
                text=text,
            )
        )
    return tuple(found)


@functools.cache
def example_pods() -> tuple[ExamplePod, ...]:
    """Every example pod manifest, sorted by file name."""
    found = []
    for path in sorted(PODS_DIR.glob("*.yaml")):
        text = path.read_text()
        data = yaml.safe_load(text) or {}
        meta = data.get("metadata") or {}
        found.append(
            ExamplePod(
                key=path.stem,
                name=str(meta.get("name", path.stem)),
                namespace=str(meta.get("namespace", "default")),
                scheduler_name=str((data.get("spec") or {}).get("schedulerName", "")),
                notes=_comment_header(text),
                text=text,
            )
        )
    return tuple(found)


def example_policy(*, key: str) -> ExamplePolicy | None:
    return next((e for e in example_policies() if e.key == key), None)


def example_pod(*, key: str) -> ExamplePod | None:
    return next((p for p in example_pods() if p.key == key), None)
