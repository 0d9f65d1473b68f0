"""Cooperative deadlines: a request's wall-clock guard (previews, validation) and a per-request
budget for callers that must answer anyway (the extender, the commands).

The engine is synchronous Python, so a request cannot be interrupted from outside; instead the
code that counts cost checks the clock:

- the interpreter's Frame every CHECK_EVERY cost units (comprehension steps and large results,
  where the cost counter is already compared with its limit);
- the policy's evaluation before each node (generated code) and each rule (exact path);
- inside the calls that loop in Python, every 64 searches of findAll (functions.py).

    with deadline(2.0):
        preview_run(...)        # raises EvaluationTimeout once 2 s have passed
    with budget(2.0):
        policy.evaluate(...)    # past 2 s, the nodes not judged yet follow failurePolicy

`deadline` stops the request: EvaluationTimeout reaches the caller (the preview's 503). `budget`
is the same clock looked at the same places, but CompiledPolicy.evaluate catches it: the nodes
it has judged keep their verdicts, the others get the policy's failurePolicy (Ignore: pass with
score 0; Fail: rejected) with a RuleError, and Evaluation.stopped says how many (what the
extender answers kube-scheduler, and what `evaluate` prints). Outside an evaluation (compiling,
a queue key) a budget raises EvaluationTimeout like a deadline, with `soft` set. Nested blocks
keep the earlier end, whichever kind it is.

The clock is `time.monotonic` unless the block names another (`deadline(5, clock=...)`): a test
gives it a clock it controls, so "past the deadline" never depends on how fast the machine is.

EvaluationTimeout derives from BaseException, like KeyboardInterrupt: it is a request to stop,
not an evaluation error, so nothing that absorbs errors (`||`, the quantifiers, the fast path's
hand-over to the exact path, `except Exception` around foreign calls) can swallow it. Without a
deadline or budget (background tasks) nothing is checked: the bound is the cost budget.
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
    """The evaluation ran past its deadline; `seconds` is the limit that was set, `soft` that
    it was a `budget` (an evaluation then finishes under failurePolicy instead)."""

    def __init__(self, seconds: float, *, soft: bool = False) -> None:
        super().__init__(f"the evaluation took longer than {seconds:g} s and was stopped")
        self.seconds = seconds
        self.soft = soft
        # set by the generated node loop on its way out: what it had judged (policy.py)
        self.partial: tuple | None = None


_LIMIT: contextvars.ContextVar[float] = contextvars.ContextVar("schedweb_cel_limit", default=0.0)
# The end of the innermost `budget` block when it is the deadline in force, else None.
_SOFT: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "schedweb_cel_soft", default=None
)


@contextmanager
def deadline(
    seconds: float | None, *, clock: Callable[[], float] | None = None, soft: bool = False
) -> Iterator[None]:
    """Evaluations in this block stop with EvaluationTimeout after `seconds` (None or <= 0: no
    limit) by `clock` (default: the enclosing block's, else time.monotonic). Nested blocks keep
    the earlier of the two deadlines. `soft`: see `budget`."""
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
        soft_token = _SOFT.set(at if soft else None)
        try:
            yield
        finally:
            _DEADLINE.reset(token)
            _LIMIT.reset(limit_token)
            _SOFT.reset(soft_token)
    finally:
        if clock_token is not None:
            _CLOCK.reset(clock_token)


def budget(seconds: float | None, *, clock: Callable[[], float] | None = None):
    """A per-request budget the caller sets (the extender, `evaluate`, `policy test`): the
    same clock looked at the same places as `deadline`, but a policy evaluation that runs past
    it finishes under the policy's failurePolicy instead of stopping (module docstring).
    `clock`: time.monotonic (wall) by default; time.thread_time makes it a CPU budget."""
    return deadline(seconds, clock=clock, soft=True)


def deadline_get() -> float | None:
    """The monotonic time evaluations must stop at, or None."""
    return _DEADLINE.get()


def deadline_check() -> None:
    """EvaluationTimeout when the current deadline has passed (a no-op without one)."""
    at = _DEADLINE.get()
    if at is not None and now() > at:
        deadline_passed()


def deadline_passed() -> None:
    """Raise EvaluationTimeout for the current deadline (the caller saw the clock past it)."""
    at = _DEADLINE.get()
    raise EvaluationTimeout(_LIMIT.get(), soft=at is not None and _SOFT.get() == at)
