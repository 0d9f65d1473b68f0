"""The scheduler configuration the model runs: plugin weights, disabled plugins, the
NodeResourcesFit scoring strategy and the extender weight.

`profile_default()` is the profile `policies/schedulerconfig.py` generates (kube-scheduler's
default plugins, v1.35 `getDefaultPlugins`, plus the extender at weight 1); `profile_parse()`
reads a pasted KubeSchedulerConfiguration v1 and returns every problem at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import yaml

# Filter plugins in the order the default profile runs them (default_plugins.go). Volume plugins
# and DynamicResources are not modelled: the pipeline says so for pods that use volumes/claims.
FILTERS = (
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "PodTopologySpread",
    "InterPodAffinity",
)
# Score plugins and their default weights (default_plugins.go, v1.35.8).
DEFAULT_WEIGHTS = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "NodeResourcesFit": 1,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
}
STRATEGIES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")
API_VERSION = "kubescheduler.config.k8s.io/v1"


@dataclass(frozen=True)
class Profile:
    """One kube-scheduler profile as the model runs it."""

    scheduler_name: str = "default-scheduler"
    weights: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    disabled: frozenset[str] = frozenset()  # filter or score plugins switched off
    strategy: str = "LeastAllocated"
    # NodeResourcesFit scoring resources: (name, weight); RequestedToCapacityRatio shape points
    resources: tuple[tuple[str, int], ...] = (("cpu", 1), ("memory", 1))
    shape: tuple[tuple[int, int], ...] = ((0, 10), (100, 0))
    balanced_resources: tuple[tuple[str, int], ...] = (("cpu", 1), ("memory", 1))
    extender_weight: int = 1  # 0 = no extender configured
    percentage_of_nodes_to_score: int = 0  # 0 = kube-scheduler's adaptive default

    def filter_enabled(self, name: str) -> bool:
        return name not in self.disabled

    def score_weight(self, name: str) -> int:
        return 0 if name in self.disabled else self.weights.get(name, 0)


def profile_default(*, extender_weight: int = 1) -> Profile:
    """The profile of the KubeSchedulerConfiguration `schedulerconfig` prints by default."""
    return Profile(extender_weight=extender_weight)


class ProfileInvalid(ValueError):
    """A pasted configuration the model cannot run; `errors` lists every problem."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("; ".join(errors))


def _int(value: Any, where: str, errors: list[str], *, default: int = 0) -> int:
    """`value` as an integer, or `default` with an error at `where`."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        errors.append(f"{where}: expected an integer, got {value!r}")
        return default
    try:
        return int(value)
    except ValueError:
        errors.append(f"{where}: expected an integer, got {value!r}")
        return default


def _pairs(items: Any, key: str, value: str, where: str, errors: list[str]) -> tuple:
    out = []
    if items is not None and not isinstance(items, list):
        errors.append(f"{where}: expected a list")
        return ()
    for i, item in enumerate(items or []):
        if not isinstance(item, dict) or key not in item:
            errors.append(f"{where}[{i}]: expected an object with {key}")
            continue
        out.append((item[key], _int(item.get(value, 1), f"{where}[{i}].{value}", errors)))
    return tuple(out)


def profile_parse(text: str, *, scheduler_name: str | None = None) -> Profile:
    """The profile of a KubeSchedulerConfiguration v1 (the one named `scheduler_name`, else the
    first), with its extender weight; raises ProfileInvalid listing every problem."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ProfileInvalid([f"not YAML: {exc}"]) from None
    errors: list[str] = []
    if not isinstance(doc, dict):
        raise ProfileInvalid(["expected a KubeSchedulerConfiguration object"])
    if doc.get("apiVersion") != API_VERSION:
        errors.append(f"apiVersion: expected {API_VERSION}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") != "KubeSchedulerConfiguration":
        errors.append(f"kind: expected KubeSchedulerConfiguration, got {doc.get('kind')!r}")
    profiles = doc.get("profiles") or [{}]
    if not isinstance(profiles, list) or not all(isinstance(p, dict) for p in profiles):
        raise ProfileInvalid([*errors, "profiles: expected a list of profile objects"])
    index = 0
    if scheduler_name is not None:
        named = [
            i
            for i, p in enumerate(profiles)
            if (p.get("schedulerName") or "default-scheduler") == scheduler_name
        ]
        if not named:
            errors.append(f"profiles: no profile has schedulerName {scheduler_name!r}")
        else:
            index = named[0]
    chosen = profiles[index]
    base = f"profiles[{index}]"
    profile = Profile(scheduler_name=chosen.get("schedulerName") or "default-scheduler")
    weights = dict(DEFAULT_WEIGHTS)
    disabled: set[str] = set()
    plugins = chosen.get("plugins") or {}
    for point in ("multiPoint", "filter", "score"):
        section = plugins.get(point) or {}
        for i, item in enumerate(section.get("disabled") or []):
            name = (item or {}).get("name")
            if name == "*":
                disabled |= set(DEFAULT_WEIGHTS) if point == "score" else set()
                if point in ("multiPoint", "filter"):
                    disabled |= set(FILTERS)
                if point == "multiPoint":
                    disabled |= set(DEFAULT_WEIGHTS)
            elif name:
                disabled.add(name)
            else:
                errors.append(f"{base}.plugins.{point}.disabled[{i}].name: required")
        for i, item in enumerate(section.get("enabled") or []):
            name = (item or {}).get("name")
            if not name:
                errors.append(f"{base}.plugins.{point}.enabled[{i}].name: required")
                continue
            disabled.discard(name)
            if item.get("weight") is not None and point != "filter":
                where = f"{base}.plugins.{point}.enabled[{i}].weight"
                weights[name] = _int(item["weight"], where, errors)
    profile = replace(profile, weights=weights, disabled=frozenset(disabled))
    for i, cfg in enumerate(chosen.get("pluginConfig") or []):
        args = (cfg or {}).get("args") or {}
        where = f"{base}.pluginConfig[{i}].args"
        if cfg.get("name") == "NodeResourcesFit":
            strategy = args.get("scoringStrategy") or {}
            kind = strategy.get("type", "LeastAllocated")
            if kind not in STRATEGIES:
                errors.append(f"{where}.scoringStrategy.type: unknown {kind!r}")
                continue
            resources = _pairs(strategy.get("resources"), "name", "weight", where, errors)
            shape = profile.shape
            if kind == "RequestedToCapacityRatio":
                ratio = strategy.get("requestedToCapacityRatio") or {}
                points = _pairs(
                    ratio.get("shape"),
                    "utilization",
                    "score",
                    f"{where}.scoringStrategy.requestedToCapacityRatio.shape",
                    errors,
                )
                shape = tuple((int(u), s) for u, s in points if str(u).isdigit()) or shape
            profile = replace(
                profile, strategy=kind, resources=resources or profile.resources, shape=shape
            )
        elif cfg.get("name") == "NodeResourcesBalancedAllocation":
            resources = _pairs(args.get("resources"), "name", "weight", where, errors)
            profile = replace(profile, balanced_resources=resources or profile.balanced_resources)
    extenders = doc.get("extenders") or []
    weight = 0
    if extenders:
        weight = _int((extenders[0] or {}).get("weight"), "extenders[0].weight", errors)
        if weight <= 0:
            errors.append("extenders[0].weight: must be a positive integer")
    pct = _int(doc.get("percentageOfNodesToScore"), "percentageOfNodesToScore", errors)
    if not 0 <= pct <= 100:
        errors.append("percentageOfNodesToScore: must be between 0 and 100")
    profile = replace(profile, extender_weight=weight, percentage_of_nodes_to_score=pct)
    if errors:
        raise ProfileInvalid(errors)
    return profile
