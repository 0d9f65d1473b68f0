"""The extender listener's TLS material, reloaded when its files change, without a restart.

cert-manager renews the server certificate every 60-90 days (and a CA rotation changes the
client CA); the kubelet then swaps the mounted Secret's files (atomically: a symlink to a new
directory). uvicorn builds one SSLContext at start, so until now the extender kept serving the
old certificate until restarted.

Every TLS handshake starts on the context uvicorn made; its `sni_callback` (called by OpenSSL
for every ClientHello, with or without a server name) hands the connection the current context,
built afresh from the files when their identity (device, inode, size, mtime of each, symlinks
followed) differs from the last build's. A new context carries the new server certificate and
key and trusts only the new client CA: connections already established keep the context they
shook hands with, so a call in flight is never cut, and the next handshake uses the new one.
Files that do not load (half-written, a key that does not match) leave the last good context in
use, with a warning, and are tried again at the next handshake. Checking costs three stat() calls
per handshake; kube-scheduler keeps its connection alive, so handshakes are rare.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger(__name__)

Stamp = tuple[tuple[int, int, int, int] | None, ...]


def files_stamp(paths: Sequence[str | os.PathLike[str]]) -> Stamp:
    """What identifies the files' current contents: (device, inode, size, mtime) of each, None
    for one that cannot be read."""
    stamp = []
    for path in paths:
        try:
            found = os.stat(path)
        except OSError:
            stamp.append(None)
        else:
            stamp.append((found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns))
    return tuple(stamp)


class ReloadingContext:
    """The current server context, rebuilt by `build` when `paths` change (see the module
    docstring). `entry` is the context the listener was given: its sni_callback does the swap."""

    def __init__(
        self,
        *,
        entry: ssl.SSLContext,
        build: Callable[[], ssl.SSLContext],
        paths: Sequence[str | os.PathLike[str]],
    ) -> None:
        self._build = build
        self._paths = tuple(paths)
        self._lock = threading.Lock()
        self._current = entry
        self._stamp = files_stamp(self._paths)
        self._failed: Stamp | None = None
        self.reloads = 0
        entry.sni_callback = self._on_hello

    def current(self) -> ssl.SSLContext:
        """The context for a new handshake: rebuilt first if the files changed."""
        stamp = files_stamp(self._paths)
        if stamp == self._stamp or stamp == self._failed:
            return self._current
        with self._lock:
            if stamp != self._stamp and stamp != self._failed:
                self._reload(stamp)
            return self._current

    def _reload(self, stamp: Stamp) -> None:
        try:
            context = self._build()
        except (OSError, ssl.SSLError, ValueError) as exc:
            self._failed = stamp  # not again until the files change once more
            log.warning(
                "extender TLS files changed but do not load (%s); keeping the last ones", exc
            )
            return
        self._current, self._stamp, self._failed = context, stamp, None
        self.reloads += 1
        log.info("extender TLS: reloaded the server certificate and client CA from their files")

    def _on_hello(self, connection: Any, server_name: str | None, entry: ssl.SSLContext) -> None:
        try:
            context = self.current()
            if context is not entry:
                connection.context = context
        except Exception:  # never fail a handshake over a reload: the entry context still works
            log.exception("extender TLS: could not pick the current context")
        return None


def reloading_ssl_context(
    config: Any, default_factory: Callable[[], ssl.SSLContext]
) -> ssl.SSLContext:
    """uvicorn's `ssl_context_factory`: the context uvicorn would build, whose handshakes use
    the files' current contents (ReloadingContext). Module-level, so that uvicorn's spawned
    workers can import it."""
    entry = default_factory()
    paths = [p for p in (config.ssl_certfile, config.ssl_keyfile, config.ssl_ca_certs) if p]
    ReloadingContext(entry=entry, build=default_factory, paths=paths)
    return entry
