"""The candidate lists kube-scheduler sends again, with their node views (issue 28).

kube-scheduler asks about a window of its nodes (percentageOfNodesToScore: 500 of 5000) that
moves on by the nodes it looked at. Its filter plugins run over that window in parallel and the
list it sends is in the order they finished, so a window comes back as the same list only some
of the time (a quarter of filters at 5000 nodes, live); prioritize's check that filter's views
still hold (shared.py) asks about the very list filter just did. Looking 500 names up in a
5000-node snapshot again, on memory other requests pushed out of the CPU's caches (the key
strings compared, the entries and views read), took 245 us where the same lookups repeated at
once took 50 (docs/perf/issue-28-windows.txt). A list seen before is found by its names joined
(built from the request's own strings, still in cache), and its views are brought up to date
from the names of the nodes changed since (ClusterState.node_changes_since): a pod bound changes
one view.

Exact, never approximate: an entry is used only for the very snapshot object it was built from
(a frozen snapshot never changes; the in-place one says what changed), and for the same names
in the same order (the joined strings are compared whole; a window is kept only when no name
has a NUL in it, so with the count of names in the key two lists never share one). The state's
Lineage journal does not serve here: it restarts at each freeze, and an in-place state is never
frozen. Bounded: at most CAPACITY windows,
forgotten all at once when full, each at most KEY_CHARS_MAX characters joined (3 MB in all); a
window whose nodes changed by more than CHANGES_MAX since is built again. A client that sends
windows of its own can push kube-scheduler's out: they are then looked up as before the cache.
"""

from __future__ import annotations

import weakref
from typing import Any

CAPACITY = 32  # lists remembered (5000 nodes: 10 windows of 500 candidates, in turn)
CHANGES_MAX = 256  # node changes brought into a window before it is looked up afresh
KEY_CHARS_MAX = 65_536  # a longer candidate list (a client's, not kube-scheduler's) is not kept
_SEPARATOR = "\x00"


class _Window:
    __slots__ = ("current", "names", "positions", "state")

    def __init__(self, state: Any, mark: int, views: list, names: list[str]) -> None:
        self.state = weakref.ref(state)
        self.names = names  # the request's list that built it: the engine's memo keys
        # (the state's node_mark(), the views then): one assignment, so that a reader never
        # pairs a mark with views of another; the list is shared with callers, never modified.
        self.current = (mark, views)
        self.positions: dict[str, int] | None = None  # name -> index, built on first change


class Windows:
    """Node views for candidate lists seen before; one per Extender (its lock's readers)."""

    def __init__(self) -> None:
        self._windows: dict[tuple[int, str], _Window] = {}
        self.hits = self.misses = 0
        self._last: tuple[list[str], list[str]] | None = None  # (asked, kept) of the last hit

    def views(self, names: list[str], state: Any) -> list | None:
        """The views of `names` in `state`, in their order, as `map(state.node_lookup(),
        names)` gives them; None when a name is unknown to the state (the caller judges it)."""
        if len(names) < 2 or 2 * len(names) > KEY_CHARS_MAX:  # not kept: not even joined
            return _looked_up(names, state)
        key = (len(names), _SEPARATOR.join(names))
        window = self._windows.get(key)
        if window is not None and window.state() is state:
            views = self._brought_up(window, names, state)
            if views is not None:
                self.hits += 1
                self._last = (names, window.names)
                return views
        self.misses += 1
        self._last = None
        views = _looked_up(names, state)
        joined = key[1]
        if (
            views is not None
            and len(joined) <= KEY_CHARS_MAX
            and joined.count(_SEPARATOR) == len(names) - 1  # no NUL in a name
        ):
            if len(self._windows) >= CAPACITY:
                self._windows = {}
            self._windows[key] = _Window(state, state.node_mark(), views, names)
        return views

    def kept_names(self, names: list[str]) -> list[str]:
        """The window's own list equal to `names`, if `views()` was just given `names` and
        found that window, else `names`. The engine's memo is keyed by name strings: probed with
        the strings it stored, a probe matches by identity instead of comparing characters
        that are out of the CPU's caches (5-10% of a pair in process)."""
        last = self._last
        return last[1] if last is not None and last[0] is names else names

    def _brought_up(self, window: _Window, names: list[str], state: Any) -> list | None:
        mark = state.node_mark()
        held, views = window.current
        if held == mark:
            return views
        changed = state.node_changes_since(held)
        if changed is None or len(changed) > CHANGES_MAX:
            return None
        positions = window.positions
        if positions is None:
            positions = window.positions = {name: i for i, name in enumerate(names)}
        copied = False
        lookup = state.node_lookup()
        for name in changed:
            i = positions.get(name)
            if i is None:
                continue
            view = lookup(name)
            if view is None:  # removed: looked up afresh (and judged unknown by the caller)
                return None
            if not copied:
                views, copied = list(views), True
            views[i] = view
        window.current = (mark, views)
        return views


def _looked_up(names: list[str], state: Any) -> list | None:
    views = list(map(state.node_lookup(), names))
    return views if all(views) else None  # a view is never empty: falsy only where unknown
