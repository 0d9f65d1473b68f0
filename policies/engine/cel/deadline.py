"""A cooperative wall-clock deadline for evaluations a person waits for (previews, validation).

The engine is synchronous Python, so a request cannot be interrupted from outside; instead the
code that counts cost checks the clock:

- the interpreter's Frame every CHECK_EVERY cost units (comprehension steps and large results,
  where the cost counter is already compared with its limit);
- the policy's evaluation before each node (generated code) and each rule (exact path).

    with deadline(2.0):
        preview_run(...)        # raises EvaluationTimeout once 2 s have passed

EvaluationTimeout derives from BaseException, like KeyboardInterrupt: it is a request to stop,
not an evaluation error, so nothing that absorbs errors (`||`, the quantifiers, the fast path's
hand-over to the exact path, `except Exception` around foreign calls) can swallow it. Without a
deadline (the extender, the commands, background tasks) nothing is checked: the extender's own
bound is the cost budget.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager

CHECK_EVERY = 10_000  # cost units between two looks at the clock in the interpreter

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "schedweb_cel_deadline", default=None
)
monotonic = time.monotonic


class EvaluationTimeout(BaseException):
    """The evaluation ran past its deadline; `seconds` is the limit that was set."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the evaluation took longer than {seconds:g} s and was stopped")
        self.seconds = seconds


_LIMIT: contextvars.ContextVar[float] = contextvars.ContextVar("schedweb_cel_limit", default=0.0)


@contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Evaluations in this block stop with EvaluationTimeout after `seconds` (None or <= 0: no
    limit). Nested blocks keep the earlier of the two deadlines."""
    if seconds is None or seconds <= 0:
        yield
        return
    at = monotonic() + seconds
    current = _DEADLINE.get()
    if current is not None and current <= at:
        yield
        return
    token, limit_token = _DEADLINE.set(at), _LIMIT.set(seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)
        _LIMIT.reset(limit_token)


def deadline_get() -> float | None:
    """The monotonic time evaluations must stop at, or None."""
    return _DEADLINE.get()


def deadline_check() -> None:
    """EvaluationTimeout when the current deadline has passed (a no-op without one)."""
    at = _DEADLINE.get()
    if at is not None and monotonic() > at:
        raise EvaluationTimeout(_LIMIT.get())


def deadline_passed() -> None:
    """Raise EvaluationTimeout for the current deadline (the caller saw the clock past it)."""
    raise EvaluationTimeout(_LIMIT.get())
