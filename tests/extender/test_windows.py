"""Candidate windows seen before (policies/extender/windows.py): their views are always exactly
what looking every name up in the snapshot now gives, over a real ClusterState changed the ways
a watch changes it (pods bound, moved and deleted, nodes relabelled, added and removed)."""

from __future__ import annotations

import random

from policies.cluster.state import NODE_LOG_MAX, ClusterState
from policies.extender import windows
from policies.extender.windows import Windows
from tests.builders import make_node, make_pod

NAMES = [f"n{i:02d}" for i in range(40)]


def _state() -> ClusterState:
    return ClusterState.from_objects([make_node(name) for name in NAMES], [])


def _truth(state, names: list[str]) -> list | None:
    views = [state.node(name) for name in names]
    return None if None in views else views


def _same(got: list | None, want: list | None) -> bool:
    """The very view objects (a copy equal in value would hide a stale one)."""
    if got is None or want is None:
        return got is want
    return len(got) == len(want) and all(g is w for g, w in zip(got, want, strict=True))


def test_a_window_seen_again_is_not_looked_up_and_follows_a_bound_pod():
    state, cache = _state(), Windows()
    window = NAMES[5:15]
    first = cache.views(window, state)
    assert _same(first, _truth(state, window)) and cache.misses == 1
    assert cache.views(list(window), state) is first and cache.hits == 1  # equal, other list

    state.apply_pod(make_pod("p1", cpu="1", node_name="n07"))  # n07's view is replaced
    again = cache.views(window, state)
    assert _same(again, _truth(state, window)) and cache.hits == 2
    assert again[2] is state.node("n07") and again[2] is not first[2]
    assert first[2] is not state.node("n07")  # what the first caller holds was not modified

    state.apply_pod(make_pod("p2", cpu="1", node_name="n30"))  # outside the window
    assert cache.views(window, state) is again


def test_a_removed_node_is_unknown_and_a_returning_one_is_seen():
    state, cache = _state(), Windows()
    window = NAMES[:10]
    cache.views(window, state)
    state.delete_node("n03")
    assert cache.views(window, state) is None  # the caller looks the names up one by one
    state.apply_node(make_node("n03", labels={"back": "yes"}))
    views = cache.views(window, state)
    assert _same(views, _truth(state, window)) and views[3]["labels"]["back"] == "yes"


def test_the_order_of_the_names_is_part_of_the_window():
    state, cache = _state(), Windows()
    window = NAMES[:10]
    cache.views(window, state)
    backwards = list(reversed(window))
    assert _same(cache.views(backwards, state), _truth(state, backwards))
    assert cache.misses == 2


def test_names_with_a_nul_never_match_a_window_whose_names_joined_alike():
    state = ClusterState.from_objects([make_node("a"), make_node("b"), make_node("c")], [])
    cache = Windows()
    cache.views(["a", "b", "c"], state)
    assert cache.views(["a\x00b", "c"], state) is None  # two names, not three: no match
    assert cache.views(["a", "b\x00c", "x"], state) is None  # three names, "x" unknown
    assert _same(cache.views(["a", "b", "c"], state), _truth(state, ["a", "b", "c"]))


def test_another_snapshot_object_and_a_forgotten_history_build_the_window_again():
    state, cache = _state(), Windows()
    window = NAMES[:10]
    frozen = state.freeze()
    held = cache.views(window, frozen)
    assert cache.views(window, frozen) is held  # a frozen snapshot never changes
    state.apply_pod(make_pod("p1", cpu="1", node_name="n01"))
    later = state.freeze()
    assert _same(cache.views(window, later), _truth(later, window))
    assert cache.misses == 2

    cache.views(window, state)
    for i in range(windows.CHANGES_MAX + 1):  # more changes than a window is brought through
        state.apply_pod(make_pod(f"q{i}", cpu="1m", node_name=NAMES[i % 10]))
    misses = cache.misses
    assert _same(cache.views(window, state), _truth(state, window))
    assert cache.misses == misses + 1


def test_a_mark_older_than_the_log_is_not_answered():
    state = _state()
    mark = state.node_mark()
    assert state.node_changes_since(mark) == []
    state.apply_pod(make_pod("p1", cpu="1", node_name="n02"))
    assert state.node_changes_since(mark) == ["n02"]
    for i in range(2 * NODE_LOG_MAX + 1):
        state.apply_node(make_node("n02", labels={"turn": str(i)}))
    assert state.node_changes_since(mark) is None
    assert state.freeze().node_changes_since(0) == []


def test_the_cache_is_bounded():
    state, cache = _state(), Windows()
    for start in range(windows.CAPACITY + 5):
        cache.views([NAMES[start % 40], NAMES[(start + 1) % 40], NAMES[(start + 2) % 40]], state)
        assert len(cache._windows) <= windows.CAPACITY


def test_windows_agree_with_lookups_through_random_watch_changes():
    """Windows overlapping and repeating, as kube-scheduler's turn; after every change to the
    state, each window's views are the very objects a lookup gives, or None where one is
    unknown."""
    rng = random.Random(28)
    state, cache = _state(), Windows()
    names = list(NAMES)
    windows_ = [names[i : i + 12] for i in range(0, 40, 4)] + [names[::3], ["n00", "zz"]]
    pods = 0
    for _ in range(600):
        action = rng.random()
        if action < 0.5:
            pods += 1
            state.apply_pod(make_pod(f"p{pods}", cpu="10m", node_name=rng.choice(names)))
        elif action < 0.6 and pods:
            pod = state.pods()[rng.randrange(len(state.pods()))]
            state.delete_pod(pod["uid"])
        elif action < 0.75:
            state.apply_node(make_node(rng.choice(names), labels={"r": str(rng.random())}))
        elif action < 0.8:
            state.delete_node(rng.choice(names))
        else:
            name = rng.choice(NAMES)
            state.apply_node(make_node(name))
        for window in rng.sample(windows_, 4):
            assert _same(cache.views(window, state), _truth(state, window)), window
    assert cache.hits > 300  # of 2400 (a window with a removed node is None): they came back


def test_a_long_candidate_list_is_answered_and_not_kept():
    names = [f"node-with-a-rather-long-name-{i:05d}" for i in range(3000)]  # 100 000 chars
    state = ClusterState.from_objects([make_node(name) for name in names], [])
    cache = Windows()
    assert _same(cache.views(names, state), _truth(state, names))
    assert cache._windows == {}
    short = names[:500]
    assert _same(cache.views(short, state), _truth(state, short))
    assert len(cache._windows) == 1 and len(next(iter(cache._windows))[1]) <= windows.KEY_CHARS_MAX


def test_the_names_kept_are_the_windows_own_and_only_for_the_list_just_asked():
    state, cache = _state(), Windows()
    window = NAMES[:10]
    cache.views(window, state)
    assert cache.kept_names(window) is window  # built from it: nothing else kept
    again = list(window)
    cache.views(again, state)
    assert cache.kept_names(again) is window  # equal, and the strings the memo stored
    other = NAMES[10:20]
    assert cache.kept_names(other) is other  # not the list views() was just given
    cache.views(other, state)
    assert cache.kept_names(again) is again


def test_a_client_cycling_lists_of_its_own_never_changes_kube_schedulers_views():
    """Another client's lists between kube-scheduler's: they push its window out (then it is
    looked up as before the cache), but every answer stays the views a lookup gives, and the
    cache stays bounded."""
    state, cache = _state(), Windows()
    ours = NAMES[:20]
    cache.views(ours, state)
    rng = random.Random(7)
    for i in range(3 * windows.CAPACITY):
        theirs = rng.sample(NAMES, 5) + [f"ghost-{i}"] * (i % 2)  # some name no node has
        assert _same(cache.views(theirs, state), _truth(state, theirs))
        state.apply_pod(make_pod(f"p{i}", cpu="1m", node_name=rng.choice(ours)))
        assert _same(cache.views(ours, state), _truth(state, ours))
        assert len(cache._windows) <= windows.CAPACITY
