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
  counted. And the whole body must arrive within SCHEDWEB_BODY_DEADLINE_SECONDS of the headers,
  whatever the gaps (issue 27: a byte every 5 s was never cut off); that total counts every
  second. Past either the connection is closed and the application's `receive` gets
  http.disconnect. The body's size is bounded by the application (the extender's
  SCHEDWEB_EXTENDER_MAX_BODY_BYTES, Django's DATA_UPLOAD_MAX_MEMORY_SIZE).
- connections: each process keeps at most SCHEDWEB_MAX_CONNECTIONS open; one more is answered
  503 and closed when it is made (for TLS, after its handshake).
- a request with more than one Host header is answered 400 and its connection closed (RFC 9112
  section 3.2), whichever Host comes first.
- a TLS request answered while more than ABORT_MIN_BYTES of its body were still to come (413,
  503) has its connection ended once the answer has left, rather than closed gracefully: a
  graceful close reads and decrypts the rest of the body while waiting for close_notify.
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

_BUSY_TEXT = b"Too many connections; retry.\n"
_BUSY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: %d\r\n"
    b"connection: close\r\n"
    b"retry-after: 1\r\n"
    b"\r\n" % len(_BUSY_TEXT)
) + _BUSY_TEXT
_DUPLICATE_HOST = "A request has at most one Host header (RFC 9112, section 3.2)."
CAP_LOG_SECONDS = 10.0  # a listener at its connection cap says so at most this often
ABORT_WAIT_SECONDS = 1.0  # an answer given before the body was read: at most this to leave
ABORT_MIN_BYTES = 1 << 20  # unread body past which such a TLS connection is ended, not drained
_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: 16\r\n"
    b"connection: close\r\n"
    b"\r\n"
    b"Request Timeout\n"
)


def _settings():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "schedweb.settings")
    from django.conf import settings

    return settings


def _timeouts() -> tuple[float, float]:
    """(header seconds, body seconds) from the settings."""
    settings = _settings()
    return settings.SCHEDWEB_HEADER_TIMEOUT_SECONDS, settings.SCHEDWEB_BODY_TIMEOUT_SECONDS


_cap_logged = 0.0


class TimedHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol that closes connections whose client stalls in its headers or body.

    One timer per connection at most: armed for the headers at connection and at the start of
    each request, re-armed for the body when the headers are complete, cancelled when the
    request is complete (the application's own time is not bounded here).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_seconds, self.body_seconds = _timeouts()
        settings = _settings()
        self.body_deadline_seconds = settings.SCHEDWEB_BODY_DEADLINE_SECONDS
        self.max_connections = settings.SCHEDWEB_MAX_CONNECTIONS
        self._deadline: asyncio.TimerHandle | None = None
        self._stage = ""
        self._last_body = 0.0
        self._body_due = 0.0  # when the whole body must have come (the loop's clock)
        self._body_received = 0  # bytes of the current request's body so far
        self._refused = False  # answered 400 or 503 and closing: the parser's callbacks end here

    # -- the stages --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            self._refuse_connection()
            return
        self._arm(_HEADERS, self.header_seconds)

    def _refuse_connection(self) -> None:
        global _cap_logged
        self._refused = True
        now = self.loop.time()
        if now - _cap_logged >= CAP_LOG_SECONDS:
            _cap_logged = now
            self.logger.warning(
                "%d connections open: refusing more (SCHEDWEB_MAX_CONNECTIONS)",
                self.max_connections,
            )
        self.transport.write(_BUSY_RESPONSE)
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
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
        if self._refused or self.transport.is_closing():
            return  # a request pipelined behind a refused one: nothing more is answered
        if sum(1 for name, _value in self.headers if name == b"host") > 1:
            self._refused = True
            self._disarm()
            self.send_400_response(_DUPLICATE_HOST)
            return
        super().on_headers_complete()
        self.arm_body()

    def arm_body(self) -> None:
        """The body's deadlines start: the gap between reads and the whole body's total."""
        self._body_received = 0
        now = self.loop.time()
        self._last_body = now
        self._body_due = now + self.body_deadline_seconds
        self._arm(_BODY, min(self.body_seconds, self.body_deadline_seconds))

    def on_body(self, body: bytes) -> None:
        if self._refused:
            return
        super().on_body(body)
        self._last_body = self.loop.time()
        self._body_received += len(body)

    def on_message_complete(self) -> None:
        if self._refused:
            return
        super().on_message_complete()
        self._disarm()

    def on_response_complete(self) -> None:
        cycle = self.cycle
        super().on_response_complete()
        if (
            cycle is not None
            and cycle.more_body
            and self.transport.is_closing()
            and self.scheme == "https"
            and self._body_left() > ABORT_MIN_BYTES
        ):
            # Answered (a 413, a 503) long before the request's body was read, and closing:
            # under TLS, closing waits for the client's close_notify, reading and decrypting
            # whatever it still sends meanwhile: a refused 60 MB upload cost the listener 60 ms
            # of CPU. The connection ends as soon as the answer has left instead (a client
            # still sending may see the reset rather than the answer; one that waits for it,
            # with Expect: 100-continue, gets the answer).
            self._abort_when_sent(ABORT_WAIT_SECONDS)

    def _body_left(self) -> float:
        """Bytes of the current request's body not received yet (infinite when chunked)."""
        for name, value in self.headers or ():
            if name == b"content-length" and value.isdigit():
                return int(value) - self._body_received
        return float("inf")

    def _abort_when_sent(self, patience: float) -> None:
        if self.transport.get_write_buffer_size() and patience > 0:
            self.loop.call_later(0.01, self._abort_when_sent, patience - 0.01)
            return
        self.transport.abort()

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
        seconds = self.header_seconds if self._stage == _HEADERS else self.body_seconds
        what = self._stage
        if self._stage == _BODY:
            now = self.loop.time()
            if self._waiting_for_application():
                self._last_body = now
            idle = now - self._last_body
            left = self._body_due - now
            if left <= 0:  # the whole body's deadline, whatever came meanwhile
                seconds, what = self.body_deadline_seconds, "whole body"
            elif idle < self.body_seconds:  # some body came since the timer was armed
                wait = min(self.body_seconds - idle, left)
                self._deadline = self.loop.call_later(wait, self._expired)
                return
        self.logger.info(
            "%s:%s - closed: no complete request %s within %g s",
            *(self.client or ("?", "?")),
            what,
            seconds,
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
