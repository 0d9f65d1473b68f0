"""uvicorn's httptools protocol with deadlines for stalled clients, for both listeners.

uvicorn 0.54 with httptools bounds only the idle time between kept-alive requests
(timeout_keep_alive). A client that connected and sent nothing, stopped halfway through its
headers, or stopped in the middle of its body held its connection (and, mid-body, the request's
task) for good: measured with raw sockets, all three were still open after 60 s. Here:

- headers: the whole header block must arrive within SCHEDWEB_HEADER_TIMEOUT_SECONDS of the
  connection (or of the first byte of a further request on a kept-alive connection), however
  it trickles in (a total, as nginx's client_header_timeout: a slowloris sending one byte a
  second never completes). Past it the client gets a 408 and the connection is closed.
- body: at least some of it must arrive every SCHEDWEB_BODY_TIMEOUT_SECONDS (a gap between two
  reads, as nginx's client_body_timeout), so a large body on a slow link still arrives; time
  while uvicorn has paused reading because the application has not taken what came is not
  counted. Past it the connection is closed and the application's `receive` gets
  http.disconnect. The body's size is bounded by the application (the extender's
  SCHEDWEB_EXTENDER_MAX_BODY_BYTES, Django's DATA_UPLOAD_MAX_MEMORY_SIZE).
- TLS: the handshake happens before uvicorn's protocol exists, under asyncio's
  ssl_handshake_timeout (60 s by default, which uvicorn does not expose); `new_event_loop` is
  uvloop's loop with the header timeout as that default, for the extender's TLS listener.

Used as uvicorn's `http=` (an import string on the command line:
`--http schedweb.http_timeouts:TimedHttpToolsProtocol`) and `loop=` (`schedweb.http_timeouts:new_event_loop`).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import uvloop
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

_HEADERS = "headers"
_BODY = "body"

_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: 16\r\n"
    b"connection: close\r\n"
    b"\r\n"
    b"Request Timeout\n"
)


def _timeouts() -> tuple[float, float]:
    """(header seconds, body seconds) from the settings."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "schedweb.settings")
    from django.conf import settings

    return settings.SCHEDWEB_HEADER_TIMEOUT_SECONDS, settings.SCHEDWEB_BODY_TIMEOUT_SECONDS


class TimedHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol that closes connections whose client stalls in its headers or body.

    One timer per connection at most: armed for the headers at connection and at the start of
    each request, re-armed for the body when the headers are complete, cancelled when the
    request is complete (the application's own time is not bounded here).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_seconds, self.body_seconds = _timeouts()
        self._deadline: asyncio.TimerHandle | None = None
        self._stage = ""
        self._last_body = 0.0

    # -- the stages --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(_HEADERS, self.header_seconds)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # Bytes on an idle kept-alive connection that begin no request (blank lines) cancelled
        # the keep-alive timer: the header deadline takes over.
        if (
            self._deadline is None
            and self.timeout_keep_alive_task is None
            and (self.cycle is None or self.cycle.response_complete)
            and not self.transport.is_closing()
        ):
            self._arm(_HEADERS, self.header_seconds)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._stage != _HEADERS:  # the first request keeps the deadline of its connection
            self._arm(_HEADERS, self.header_seconds)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._last_body = self.loop.time()
        self._arm(_BODY, self.body_seconds)

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        self._last_body = self.loop.time()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    # -- the timer ---------------------------------------------------------------------------

    def _arm(self, stage: str, seconds: float) -> None:
        self._disarm()
        self._stage = stage
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _waiting_for_application(self) -> bool:
        """Reading is paused because the application has not taken what came: not the
        client's time."""
        return self.flow.read_paused

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._stage = ""

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._stage == _BODY:
            now = self.loop.time()
            if self._waiting_for_application():
                self._last_body = now
            idle = now - self._last_body
            if idle < self.body_seconds:  # some body came since the timer was armed
                self._deadline = self.loop.call_later(self.body_seconds - idle, self._expired)
                return
        self.logger.info(
            "%s:%s - closed: no complete request %s within %g s",
            *(self.client or ("?", "?")),
            self._stage,
            self.header_seconds if self._stage == _HEADERS else self.body_seconds,
        )
        if self._stage == _HEADERS and (self.cycle is None or self.cycle.response_complete):
            self.transport.write(_TIMEOUT_RESPONSE)  # nothing of this request was answered yet
        self._stage = ""
        self.transport.close()


class _HandshakeBoundLoop(uvloop.Loop):
    """uvloop's loop whose servers bound the TLS handshake by the header timeout."""

    async def create_server(self, protocol_factory: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("ssl") is not None and kwargs.get("ssl_handshake_timeout") is None:
            kwargs["ssl_handshake_timeout"] = _timeouts()[0]
        return await super().create_server(protocol_factory, *args, **kwargs)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvicorn's `loop=` factory: uvloop, with the TLS handshake bounded like the headers."""
    return _HandshakeBoundLoop()
