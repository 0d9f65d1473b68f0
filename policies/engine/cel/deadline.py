"""A cooperative wall-clock deadline for evaluations a person waits for (previews, validation).

The engine is synchronous Python, so a request cannot be interrupted from outside; instead the
code that counts cost checks the clock:

- the interpreter's Frame every CHECK_EVERY cost units (comprehension steps and large results,
  where the cost counter is already compared with its limit);
- the policy's evaluation before each node (generated code) and each rule (exact path).

    with deadline(2.0):
        preview_run(...)        # raises EvaluationTimeout once 2 s have passed

The clock is `time.monotonic` unless the block names another (`deadline(5, clock=...)`): a test
gives it a clock it controls, so "past the deadline" never depends on how fast the machine is.

EvaluationTimeout derives from BaseException, like KeyboardInterrupt: it is a request to stop,
not an evaluation error, so nothing that absorbs errors (`||`, the quantifiers, the fast path's
hand-over to the exact path, `except Exception` around foreign calls) can swallow it. Without a
deadline (the extender, the commands, background tasks) nothing is checked: the extender's own
bound is the cost budget.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

CHECK_EVERY = 10_000  # cost units between two looks at the clock in the interpreter

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "schedweb_cel_deadline", default=None
)
_CLOCK: contextvars.ContextVar[Callable[[], float]] = contextvars.ContextVar(
    "schedweb_cel_clock", default=time.monotonic
)


def now() -> float:
    """The current block's clock (time.monotonic unless a `deadline(..., clock=)` set one)."""
    return _CLOCK.get()()


class EvaluationTimeout(BaseException):
    """The evaluation ran past its deadline; `seconds` is the limit that was set."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the evaluation took longer than {seconds:g} s and was stopped")
        self.seconds = seconds


_LIMIT: contextvars.ContextVar[float] = contextvars.ContextVar("schedweb_cel_limit", default=0.0)


@contextmanager
def deadline(seconds: float | None, *, clock: Callable[[], float] | None = None) -> Iterator[None]:
    """Evaluations in this block stop with EvaluationTimeout after `seconds` (None or <= 0: no
    limit) by `clock` (default: the enclosing block's, else time.monotonic). Nested blocks keep
    the earlier of the two deadlines."""
    clock_token = None if clock is None else _CLOCK.set(clock)
    try:
        if seconds is None or seconds <= 0:
            yield
            return
        at = now() + seconds
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
    finally:
        if clock_token is not None:
            _CLOCK.reset(clock_token)


def deadline_get() -> float | None:
    """The monotonic time evaluations must stop at, or None."""
    return _DEADLINE.get()


def deadline_check() -> None:
    """EvaluationTimeout when the current deadline has passed (a no-op without one)."""
    at = _DEADLINE.get()
    if at is not None and now() > at:
        raise EvaluationTimeout(_LIMIT.get())


def deadline_passed() -> None:
    """Raise EvaluationTimeout for the current deadline (the caller saw the clock past it)."""
    raise EvaluationTimeout(_LIMIT.get())
