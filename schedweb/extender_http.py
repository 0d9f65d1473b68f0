"""The extender listener's HTTP protocol: kube-scheduler's filter and prioritize calls answered
straight from the parser, everything else through the ASGI application.

kube-scheduler sends two requests per pod, one at a time, on one kept-alive connection, and each
answer is a sub-millisecond computation over process memory (schedweb/asgi.py, `_from_memory`).
Through uvicorn's ASGI cycle each request also paid for a RequestResponseCycle, a task, an
asyncio.Event, the scope and message dicts, and two transport writes (headers, then body): measured
in the extender during `make bench`, about 0.45 ms of the 1.6 ms of CPU the extender spent per
scheduled pod (issue 13), as much as evaluating the policy.

Here a request that is exactly the common case, decided when its headers are complete, is
answered when its body is: POST /extender/filter, /extender/prioritize or /extender/preempt,
HTTP/1.1, an allowed Host, Content-Type application/json (neither of them repeated), a
Content-Length within SCHEDWEB_EXTENDER_INLINE_BODY_BYTES, no Expect, the runtime built, no
earlier request of the connection still in the ASGI path. The answer is the same function's
(policies/extender/entry.py) with the same headers, written in one call. Any other request
(other paths and methods, a Host not allowed, a repeated Host or Content-Type, chunked or large
bodies, pipelined behind an ASGI request) takes the ASGI path unchanged, so its checks and
answers (400, 404, 405, 413, 415, the offload pool) stay in one place.
A request the snapshot is behind for (it names a node the snapshot does not hold yet, or is
about a pod it lacks: policies/extender/catch_up.py) is handed to the ASGI path once read, as if
it had taken that path from its headers: there it waits for the snapshot on the event loop, and
requests pipelined behind it queue behind its cycle, answered in order.
The deadlines for stalled clients (schedweb/http_timeouts.py) hold on both paths; as on the ASGI
path, a client that leaves its answers unread is read no further until they drain, and a
graceful shutdown answers the request being read before closing its connection
(tests/web/test_extender_direct_path.py).
"""

from __future__ import annotations

import logging
from typing import Any

from . import client_certs
from .http_timeouts import TimedHttpToolsProtocol

log = logging.getLogger(__name__)

_FAST_PATHS = {
    b"/extender/filter": "filter",
    b"/extender/prioritize": "prioritize",
    b"/extender/preempt": "preempt",
}
_INTERNAL_ERROR = b'{"Error": "internal error"}'


class ExtenderHttpProtocol(TimedHttpToolsProtocol):
    """TimedHttpToolsProtocol with the direct path for kube-scheduler's inline verbs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from django.conf import settings

        from . import asgi

        self._asgi = asgi
        self._inline_limit = settings.SCHEDWEB_EXTENDER_INLINE_BODY_BYTES
        self._allowed_hosts = settings.SCHEDWEB_EXTENDER_ALLOWED_HOSTS
        self._host_ok = b""  # the last Host value found allowed on this connection
        self._fast_verb = ""  # the verb of the request being read on the direct path
        self._fast_chunks: list[bytes] = []
        self._fast_keep_alive = True
        self._reads_wait_for_writes = False
        self._client: client_certs.Client | None = None
        self._verbs_allowed = True

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # The certificate the handshake verified, named once per connection (issue 27): only
        # kube-scheduler's may take the direct path; others get the ASGI path's 403.
        self._client = client_certs.client_of(transport)
        self._verbs_allowed = client_certs.may(self._client, client_certs.SCHEDULER)

    def on_message_begin(self) -> None:
        self._fast_verb = ""
        # A direct answer armed the keep-alive timer while the parser was still in the same
        # read; a request pipelined behind it must not be cut by it (uvicorn arms the timer only
        # when no request is pending, and cancels it in data_received).
        self._unset_keepalive_if_required()
        super().on_message_begin()
        self.scope[client_certs.SCOPE_KEY] = self._client

    def on_headers_complete(self) -> None:
        verb = self._direct_verb()
        if not verb:
            super().on_headers_complete()  # the ASGI path (and the body deadline)
            return
        self._fast_verb = verb
        self._fast_chunks = []
        self._fast_keep_alive = self.parser.should_keep_alive()
        self.arm_body()

    def _direct_verb(self) -> str:
        """The verb when this request may take the direct path, else ""."""
        verb = _FAST_PATHS.get(self.url)
        if (
            verb is None
            or self._refused
            or not self._verbs_allowed
            or not self._asgi.runtime_ready()
            or (self.cycle is not None and not self.cycle.response_complete)
            or self.parser.get_method() != b"POST"
            or self.parser.get_http_version() != "1.1"
            or self.expect_100_continue
        ):
            return ""
        host = content_type = length = None
        for name, value in self.headers:
            if name == b"host":
                if host is not None:  # repeated: the ASGI path judges the first one
                    return ""
                host = value
            elif name == b"content-type":
                if content_type is not None:
                    return ""
                content_type = value
            elif name == b"content-length":
                length = value
            elif name == b"transfer-encoding":
                return ""
        if (
            length is None
            or not length.isdigit()
            or int(length) > self._inline_limit
            or content_type is None
            or content_type.split(b";", 1)[0].strip().lower() != b"application/json"
            or host is None
        ):
            return ""
        if host != self._host_ok:
            if not self._asgi.host_allowed(host, self._allowed_hosts):
                return ""
            self._host_ok = host
        return verb

    def on_body(self, body: bytes) -> None:
        if not self._fast_verb:
            super().on_body(body)
            return
        self._fast_chunks.append(body)
        self._last_body = self.loop.time()

    def on_message_complete(self) -> None:
        verb = self._fast_verb
        if not verb:
            super().on_message_complete()
            return
        self._fast_verb = ""
        self._disarm()
        body = b"".join(self._fast_chunks)
        self._fast_chunks = []
        try:
            result = self._asgi.entry.extender_answer_or_wait(verb, body, inline=True)
        except Exception:  # the services never raise; if one does, a 500 as on the ASGI path
            log.exception("extender %s failed", verb)
            result = 500, _INTERNAL_ERROR, ""
        if type(result) is not tuple:  # it waits for the snapshot: not here
            self._to_asgi(body, offload=False)
            return
        if result[0] == self._asgi.entry.OFFLOAD:
            self._to_asgi(body, offload=True)
            return
        self._respond(*result)

    def _to_asgi(self, body: bytes, *, offload: bool) -> None:
        """A request read whole that is not answered here goes on as uvicorn would have sent
        it at its headers, with its body complete: the ASGI path. `offload`: too much work to
        answer on the loop (issue 27: 130 KB holds 4000 Node objects), the pool answers it;
        else the snapshot is behind for it, and the ASGI path waits for the snapshot without
        holding the loop and judges it again. Pipelined requests behind it then wait for its
        answer as behind any ASGI request."""
        if self.transport.is_closing():
            return  # the client is gone: nothing to answer
        if offload:
            self.scope[self._asgi.OFFLOAD_KEY] = True
        super().on_headers_complete()  # the scope, the cycle and its task
        self._disarm()  # the body is all here
        self.cycle.body += body
        self.cycle.more_body = False
        self.cycle.message_event.set()

    def _respond(self, status: int, answer: bytes, policy: str) -> None:
        """The whole response in one write, then keep-alive as after an ASGI response."""
        head = [_status_line(status)]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [
            b"content-type: application/json\r\ncontent-length: ",
            str(len(answer)).encode(),
            b"\r\n",
        ]
        if policy:
            head += [b"x-schedweb-policy: ", policy.encode(), b"\r\n"]
        if not self._fast_keep_alive:
            head.append(b"connection: close\r\n")
        head += [b"\r\n", answer]
        self.transport.write(b"".join(head))
        if status == 200:
            self._asgi.entry.after_answer()
        if not self._fast_keep_alive:
            self.server_state.total_requests += 1
            self.transport.close()
            return
        self.on_response_complete()  # counts it, arms the keep-alive timer
        if self.flow.write_paused:
            # The client does not read its answers: read no more of its requests until it does
            # (the ASGI path waits for the writes to drain; without this, a client pipelining
            # requests and never reading grew this process's write buffer without bound).
            self.flow.pause_reading()
            self._reads_wait_for_writes = True

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown: as for a request in the ASGI path, a direct request
        being read is answered (with connection: close) before its connection closes."""
        if self._fast_verb:
            self._fast_keep_alive = False
            return
        super().shutdown()

    def _waiting_for_application(self) -> bool:
        # Paused because the client does not read its answers: that is the client's time.
        return self.flow.read_paused and not self._reads_wait_for_writes

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._reads_wait_for_writes:
            self._reads_wait_for_writes = False
            self.flow.resume_reading()


_STATUS_LINES: dict[int, bytes] = {}


def _status_line(status: int) -> bytes:
    line = _STATUS_LINES.get(status)
    if line is None:
        from uvicorn.protocols.http.httptools_impl import STATUS_LINE

        line = _STATUS_LINES[status] = STATUS_LINE[status]
    return line
