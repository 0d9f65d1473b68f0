"""The snapshot's events followed on the extender listener's event loop (issue 28).

The runtime's thread (runtime.py) read the events stream with a blocking XREAD and applied each
change as it came: at 5000 nodes, while kube-scheduler binds 100-150 pods a second, that is a
wake every 10 ms, each taking the GIL from the thread answering kube-scheduler. Measured live
(docs/perf/issue-28-follow-on-loop.txt), with following the listener's every function ran 2-4
times slower than in a listener that did not follow at all (its CPU per scheduled pod 2.5-2.9 ms
against 1.6-1.9), and the same work done here between two requests took 2.5-2.8 ms against
2.9-3.9 for the thread in the same rounds: no second thread contending for the interpreter, no
hand-over of the GIL in the middle of an answer, the serve lock never waited for. The thread keeps what is slow or rare (policies, housekeeping, a full
load after a gap or a reset); this loop only applies entries that continue the version held
and never waits for the reader: whatever it cannot take (the reader busy, a gap, a reset) it
leaves to the thread's next refresh, within HOUSEKEEPING_SECONDS.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .runtime import BLOCK_SECONDS, WAKE_GAP_SECONDS, XREAD_COUNT

log = logging.getLogger(__name__)

# After the reader was busy or Redis failed: the first retry soon (a refresh holds the reader
# for one round trip), then less often (a full load holds it for seconds).
RETRY_FIRST_SECONDS = 0.01
RETRY_MAX_SECONDS = 0.5
CLOSE_SECONDS = 2.0  # the client's connections closed at the end, at most this long


async def follow_events(state: Any, client: Any = None) -> None:
    """Follows `state`'s (an ExtenderRuntime's) events stream until cancelled; returns at once
    when the process follows none (a demo or file source). `client`: an asyncio Redis client
    (one is made from the settings otherwise), closed at the end."""
    stream = state.events_stream()
    if stream is None:
        return
    if client is None:
        from policies.redis import async_redis_client

        client = async_redis_client()
    state.events_on_loop = True  # the thread's next XREAD leaves the stream to this loop
    retry = RETRY_FIRST_SECONDS
    me = asyncio.current_task()
    try:
        # until cancelled, even if the client turned the cancellation into another error
        while me is None or not me.cancelling():
            start = state.snapshots.follow_from()
            if start is None:  # no state yet: the thread loads it
                await asyncio.sleep(RETRY_MAX_SECONDS)
                continue
            try:
                pushed = await client.xread(
                    {stream: start}, count=XREAD_COUNT, block=int(BLOCK_SECONDS * 1000)
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the thread reports Redis's state; try again shortly
                log.debug("the events stream could not be read: %s", exc)
                await asyncio.sleep(retry)
                retry = min(2 * retry, RETRY_MAX_SECONDS)
                continue
            if not pushed:
                continue
            taken = True
            for _key, entries in pushed:
                if entries and state.follow_nowait(entries) is None:
                    taken = False
            if taken:
                retry = RETRY_FIRST_SECONDS
                # changes that come together are taken together (the thread's gap, the same
                # bound on how late a change can be)
                await asyncio.sleep(WAKE_GAP_SECONDS)
            else:
                await asyncio.sleep(retry)
                retry = min(2 * retry, RETRY_MAX_SECONDS)
    finally:
        state.events_on_loop = False
        try:
            await asyncio.wait_for(client.aclose(), CLOSE_SECONDS)
        except Exception:  # closing a connection to a Redis that is gone
            log.debug("closing the events client failed", exc_info=True)
