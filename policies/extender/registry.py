"""The active policy versions one extender process serves, by schedulerName: compiled from
the published set in Redis (or the database while Redis has none), rebuilt when the set's
counter moves, with each entry's shadow and canary (issue 25)."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

from policies.engine.document import PolicyInvalid
from policies.evaluation import policy_compile
from policies.rollout.split import Split

from .service import ServedPolicy

log = logging.getLogger(__name__)


class PolicyRegistry:
    """Active versions by schedulerName, rebuilt when the Redis counter moves."""

    def __init__(self) -> None:
        self.counter: int | None = None
        self.by_scheduler: dict[str, ServedPolicy] = {}
        self.loaded_from = "nothing yet"
        self.installed_at: float | None = None  # Unix time the set now served was installed
        self._compiled: dict[str, Any] = {}  # contentHash -> CompiledPolicy
        # Canaries the guard rolled back, (policy, version): never judging here again, even
        # before the rollback's distribution arrives.
        self.tripped: set[tuple[str, int]] = set()

    def install(self, entries: list[dict[str, Any]], *, source: str) -> None:
        """Compiles what is new (by content hash) and swaps the whole mapping at once."""
        by_scheduler: dict[str, ServedPolicy] = {}
        compiled_cache: dict[str, Any] = {}
        for entry in entries:
            compiled = self._compile(entry, entry["name"], compiled_cache)
            if compiled is None:
                continue
            shadow_entry = entry.get("shadow")
            shadow_compiled = (
                self._compile(shadow_entry, entry["name"], compiled_cache)
                if isinstance(shadow_entry, dict)
                else None
            )
            canary_entry = entry.get("canary")
            canary_compiled, split = None, None
            if isinstance(canary_entry, dict):
                canary_compiled = self._compile(canary_entry, entry["name"], compiled_cache)
                split = _split(canary_entry, entry["name"])
            for scheduler_name in compiled.spec.scheduler_names:
                shadow = None
                if (
                    shadow_compiled is not None
                    and scheduler_name in shadow_compiled.spec.scheduler_names
                ):
                    shadow = ServedPolicy(entry["name"], shadow_entry["version"], shadow_compiled)
                canary = None
                if (
                    canary_compiled is not None
                    and split is not None
                    and scheduler_name in canary_compiled.spec.scheduler_names
                    and (entry["name"], canary_entry["version"]) not in self.tripped
                ):
                    canary = ServedPolicy(
                        entry["name"],
                        canary_entry["version"],
                        canary_compiled,
                        arm="canary",
                        guard=canary_entry.get("guard") or {},
                    )
                by_scheduler[scheduler_name] = ServedPolicy(
                    entry["name"],
                    entry["version"],
                    compiled,
                    shadow,
                    canary=canary,
                    split=split if canary is not None else None,
                    arm="stable" if canary is not None else "",
                )
        self._compiled = compiled_cache
        self.by_scheduler = by_scheduler  # one reference swap: requests see old or new, never half
        self.loaded_from = source
        self.installed_at = time.time()

    def _compile(self, entry: dict[str, Any], name: str, cache: dict[str, Any]) -> Any:
        """The compiled document of an entry (or its shadow), reused by content hash; None (and
        logged) when it does not compile here. A shadow of the same text shares the active
        version's compiled object and its per-node memo: the same results, and the memo's
        entries are replaced whole, so a shadow stopped past its slice leaves none half made."""
        key = entry["contentHash"]
        compiled = cache.get(key) or self._compiled.get(key)
        if compiled is None:
            try:
                compiled = policy_compile(entry["document"])
            except PolicyInvalid as exc:
                log.error("policy %s v%s does not compile here: %s", name, entry["version"], exc)
                return None
        cache[key] = compiled
        return compiled

    def refresh_from_redis(self) -> bool:
        from policies.publishing import active_counter_read, active_entries_read

        counter = active_counter_read()
        if counter is None or counter == self.counter:
            return False  # None: an empty Redis; keep serving what we hold
        counter, entries = active_entries_read()
        self.install(list(entries.values()), source="redis")
        self.counter = counter
        return True

    def trip(self, name: str, version: int) -> None:
        """The guard rolled canary `version` of `name` back: the stable version judges every
        pod from now on (one reference swap, as install)."""
        self.tripped.add((name, version))
        self.by_scheduler = {
            scheduler: (
                dataclasses.replace(served, canary=None, split=None, arm="")
                if served.name == name
                and served.canary is not None
                and served.canary.version == version
                else served
            )
            for scheduler, served in self.by_scheduler.items()
        }

    def canaries(self) -> dict[str, str]:
        """The canary version deciding a share of each schedulerName's pods (issue 25)."""
        return {
            name: served.canary.label
            for name, served in sorted(self.by_scheduler.items())
            if served.canary is not None
        }

    def shadows(self) -> dict[str, str]:
        """The shadow version judged beside each schedulerName's active one (issue 25)."""
        return {
            name: served.shadow.label
            for name, served in sorted(self.by_scheduler.items())
            if served.shadow is not None
        }

    def load_from_database(self) -> None:
        """Start-up fallback when Redis cannot be read (never on a request)."""
        from policies.publishing import active_policies_entries

        self.install(active_policies_entries(), source="database")


def _split(entry: dict[str, Any], name: str) -> Split | None:
    """A canary entry's share; None (and logged: the stable version then decides every pod)
    when it is not one this process can read."""
    try:
        return Split.of(entry.get("share") or {})
    except (KeyError, TypeError, ValueError) as exc:
        log.error("canary of %s v%s has no share here: %s", name, entry.get("version"), exc)
        return None
