"""Child processes that cannot outlive the tests: each runs in its own process group, logs to a
file, and is stopped with SIGTERM then SIGKILL. The kernel kills it too if our process dies
(PR_SET_PDEATHSIG), so even a killed pytest leaves nothing behind."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)
_live: set[ManagedProcess] = set()


class ProcessError(RuntimeError):
    """A child process failed to start or to become ready; the message carries its log tail."""


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: SIGKILL it when the thread that started it exits.
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def log_tail(*, path: Path, lines: int = 40) -> str:
    """The last lines of a log, for error messages."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:]) or f"(empty log at {path})"


class ManagedProcess:
    """One long-running binary with its log file; `stop()` leaves no process of its group alive."""

    def __init__(
        self,
        *,
        name: str,
        argv: Sequence[str | os.PathLike],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = [str(arg) for arg in argv]
        self.log_path = log_path
        self.env = dict(env) if env is not None else None  # None: inherit ours
        self.cwd = cwd
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def started(self) -> bool:
        return self._popen is not None

    @property
    def pid(self) -> int:
        if self._popen is None:
            raise ProcessError(f"{self.name} was never started")
        return self._popen.pid

    def start(self) -> None:
        """Start the binary in a new session (its own process group), output appended to the log."""
        if not Path(self.argv[0]).is_file():
            raise ProcessError(f"{self.name}: binary {self.argv[0]} does not exist")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            try:
                self._popen = subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env=self.env,
                    cwd=self.cwd,
                    preexec_fn=_die_with_parent,  # one prctl call: safe between fork and exec
                )
            except OSError as err:
                raise ProcessError(f"{self.name}: cannot run {self.argv[0]}: {err}") from None
        _live.add(self)

    def exit_code(self) -> int | None:
        """None while running, else the exit status (negative: killed by that signal)."""
        return None if self._popen is None else self._popen.poll()

    def wait_ready(self, *, check: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll `check` until it is true; fail early, with the log tail, if the process exits."""
        deadline = time.monotonic() + timeout
        while True:
            code = self.exit_code()
            if code is not None:
                raise ProcessError(
                    f"{self.name} exited with code {code} before {what}; "
                    f"last lines of {self.log_path}:\n{log_tail(path=self.log_path)}"
                )
            with contextlib.suppress(OSError):
                if check():
                    return
            if time.monotonic() > deadline:
                raise ProcessError(
                    f"{self.name} did not become ready ({what}) within {timeout:.0f} s; "
                    f"last lines of {self.log_path}:\n{log_tail(path=self.log_path)}"
                )
            time.sleep(0.1)

    def stop(self, *, grace: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it after `grace` seconds, and reap the leader.

        A Ctrl-C while waiting means "now": the group is killed and reaped before it propagates.
        """
        popen = self._popen
        if popen is None:
            return
        if popen.poll() is not None:  # exited (and now reaped) on its own
            _live.discard(self)
            return
        # The group id is the leader's pid (start_new_session); it is signalled before the leader
        # is reaped, so the id cannot have been reused by then.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGTERM)
        try:
            popen.wait(timeout=grace)
        except (subprocess.TimeoutExpired, KeyboardInterrupt) as err:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
            popen.wait()
            if isinstance(err, KeyboardInterrupt):
                raise
        finally:
            if popen.returncode is not None:
                _live.discard(self)


@atexit.register
def _stop_leftovers() -> None:
    # Last resort for a ControlPlane nobody stopped (e.g. an exception between start and `with`).
    for process in list(_live):
        process.stop(grace=3.0)


def free_ports(*, count: int) -> list[int]:
    """`count` distinct free TCP ports on 127.0.0.1 (all held open together while choosing)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
