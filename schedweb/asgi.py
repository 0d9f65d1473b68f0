"""ASGI entry points, one per listener, each served by its own uvicorn:

- `application` (uvicorn schedweb.asgi:application): the pages, the API and the ops endpoints.
  It does not serve the extender: anything under /extender/ is a JSON 404 here.
- `extender_application` (python -m schedweb.extender_server, on SCHEDWEB_EXTENDER_PORT with TLS
  and optionally mutual TLS): kube-scheduler's calls (POST /extender/<verb>), kube-apiserver's
  mutating admission webhook (POST /admission/queue: queue keys as pod priorities), /healthz,
  /readyz (Django's view: what these processes serve) and /metrics (Prometheus: the counters of
  these processes, which are the ones that count), nothing else. Requests whose Host is not in
  SCHEDWEB_EXTENDER_ALLOWED_HOSTS (or with more than one Host) get a 400, requests whose
  client certificate does not hold the path's role (schedweb/client_certs.py: the verbs need
  kube-scheduler's, /admission/queue kube-apiserver's) a 403, a POST whose content type is not
  application/json a 415, all before the body is read.

The extender's calls are answered here directly, without Django's request handling: they need no
session, CSRF, auth, URL resolution or templates, and kube-scheduler waits for every one of them.
The body is read here and only here against SCHEDWEB_EXTENDER_MAX_BODY_BYTES (413 past it, the
rest unread); the answers come from policies/extender/entry.py. filter, prioritize and preempt
bodies up to SCHEDWEB_EXTENDER_INLINE_BODY_BYTES run inline on the event loop: they only read
process memory and take about a millisecond, and kube-scheduler sends one request at a time.
Larger ones go to a bounded pool of worker processes (policies/extender/offload.py; 503 when it is
full): parsing 7 MB of Node objects holds the GIL for hundreds of ms, which on the loop made
normal calls wait seconds (issue 14). bind (a call to the API server) runs in a thread; a bind
body over the inline limit is refused (413: a binding is four short strings). A filter or
prioritize the snapshot is behind for (a node or the pod it does not hold yet) awaits the
snapshot here, bounded, without holding the loop (policies/extender/catch_up.py; the direct path
of schedweb/extender_http.py hands such a request to this path). The process's
runtime (policies, snapshot reader, bind's Kubernetes client) is built at the listener's lifespan
startup, in a thread since its initial load may read the database; should that fail, the first
request builds it, in a thread too. Other methods on a verb get 405 (Allow: POST) and other
paths a JSON 404: no Django route serves /extender/.

uvicorn with httptools answers a request in about a fifth of gunicorn's per-request time here
(measured with a Go client: 0.14 ms against 0.65 ms for an empty answer), which kube-scheduler
pays twice per pod.
"""

import asyncio
import contextlib
import logging
import os
import warnings
from collections.abc import AsyncIterator
from functools import partial

from django.core.asgi import get_asgi_application
from django.http.request import split_domain_port, validate_host

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "schedweb.settings")
django_application = get_asgi_application()
# WhiteNoise hands Django static files as synchronous iterators; under ASGI Django reads them in a
# thread and warns once per file served. The files are small; the warning is noise.
warnings.filterwarnings(
    "ignore", message="StreamingHttpResponse must consume synchronous iterators"
)

from policies.admission.review import PATH as ADMISSION_PATH  # noqa: E402
from policies.extender import entry  # noqa: E402  (needs Django set up first)
from policies.extender.offload import (  # noqa: E402
    BUSY,
    SHADOW,
    Abandoned,
    Full,
    Offload,
    busy_answer,
)
from policies.extender.runtime import runtime_stop, serve_as  # noqa: E402
from schedweb import client_certs  # noqa: E402

log = logging.getLogger(__name__)
_INLINE = frozenset({"filter", "prioritize", "preempt"})
# Set in the scope by the direct path (schedweb/extender_http.py) for a body it found to be too
# much work to answer inline: the pool answers it without a second inline attempt.
OFFLOAD_KEY = "schedweb.offload"
_ready = False
_offload: Offload | None = None


async def _from_memory(answer, *args):
    """`answer(*args)` on the event loop once the runtime is built (memory only, sub-ms);
    before that (a request that beat the lifespan start) in a thread, which builds it."""
    global _ready
    if _ready:
        return answer(*args)
    result = await asyncio.to_thread(answer, *args)
    _ready = True
    return result


def _shadow_forward(pool: Offload, body: bytes, counter: int) -> bool:
    """A filter body answered under the policy set `counter`, queued for the shadow lane."""
    return pool.forward(f"{SHADOW} {counter}", body)


def _offloader() -> Offload:
    """This process's pool for large bodies (created, not started, on first use)."""
    global _offload
    if _offload is None:
        from django.conf import settings

        _offload = Offload(
            workers=settings.SCHEDWEB_EXTENDER_OFFLOAD_WORKERS,
            queue=settings.SCHEDWEB_EXTENDER_OFFLOAD_QUEUE,
            forwards=settings.SCHEDWEB_SHADOW_QUEUE,
            lane_class=settings.SCHEDWEB_SHADOW_LANE_CLASS,
        )
    return _offload


class _ClientGone(Abandoned):
    """The client disconnected before its body was complete (or stalled in it and was cut off
    by schedweb/http_timeouts.py): nothing to answer, nothing to count."""


class _TooLarge(Abandoned):
    """The body grew past its limit (the rest is not read): 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


class _Body:
    """The request body as it arrives, counted against `limit` (_TooLarge past it)."""

    def __init__(self, receive, limit: int) -> None:
        self._receive = receive
        self.limit = limit
        self.size = 0
        self.more = True

    async def piece(self) -> bytes:
        message = await self._receive()
        if message["type"] == "http.disconnect":
            raise _ClientGone
        chunk = message.get("body", b"")
        self.size += len(chunk)
        if self.size > self.limit:
            raise _TooLarge(self.limit)
        self.more = message.get("more_body", False)
        return chunk

    async def rest(self, held: list[bytes]) -> AsyncIterator[bytes]:
        """What was read already (`held`), then the pieces still to come."""
        while held:
            yield held.pop(0)
        while self.more:
            yield await self.piece()


async def _read_body(receive, limit: int) -> bytes:
    """The whole request body (_TooLarge once it grows past `limit`, the rest unread)."""
    body = _Body(receive, limit)
    chunks = []
    while body.more:
        chunks.append(await body.piece())
    return b"".join(chunks)


def runtime_ready() -> bool:
    """The process's extender runtime is built: answers come from memory, on the event loop."""
    return _ready


def host_allowed(value: bytes, allowed_hosts: list[str]) -> bool:
    """A Host header's value (port ignored) matches SCHEDWEB_EXTENDER_ALLOWED_HOSTS."""
    domain, _port = split_domain_port(value.decode("latin-1"))
    return bool(domain) and validate_host(domain, allowed_hosts)


def _host_allowed(scope, allowed_hosts: list[str]) -> bool:
    """The request's one Host header (port ignored) matches SCHEDWEB_EXTENDER_ALLOWED_HOSTS;
    a repeated Host is refused whatever the values (RFC 9112 section 3.2: 400)."""
    hosts = [value for name, value in scope["headers"] if name == b"host"]
    return len(hosts) == 1 and host_allowed(hosts[0], allowed_hosts)


def _content_length(scope) -> int:
    """The declared Content-Length, or -1 when absent or not a number (chunked bodies)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else -1
    return -1


def _is_json(scope) -> bool:
    """The request's Content-Type is application/json (parameters such as charset allowed)."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() == b"application/json"
    return False


async def _answer(
    send,
    status: int,
    answer: bytes,
    extra: list | None = None,
    *,
    content_type: bytes = b"application/json",
) -> None:
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(answer)).encode()),
    ]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": answer})


async def extender(scope, receive, send) -> None:
    """One request under /extender/: a verb's answer, 405 for other methods, 415 for a body that
    is not JSON, 404 for other paths."""
    verb = scope["path"][len(entry.PREFIX) :]
    extra = []
    if verb not in entry.VERBS:
        status, answer, policy = entry.not_found_answer(scope["path"])
    elif scope["method"] != "POST":
        status, answer, policy = entry.method_not_allowed_answer(verb)
        extra.append((b"allow", b"POST"))
    elif not _is_json(scope):
        status, answer, policy = 415, _UNSUPPORTED, ""
    else:
        try:
            status, answer, policy = await _verb_answer(verb, scope, receive)
        except _ClientGone:
            return
        except _TooLarge as exc:
            status, answer, policy = entry.too_large_answer(exc.limit)
        if status in (BUSY, 413):  # the body may be unread: the connection ends with the answer
            extra.append((b"connection", b"close"))
    if policy:
        extra.append((b"x-schedweb-policy", policy.encode()))
    await _answer(send, status, answer, extra)


async def _verb_answer(verb: str, scope, receive) -> tuple[int, bytes, str]:
    """A verb's answer. filter, prioritize and preempt: inline from memory when the body is
    small and little work (filter and prioritize awaiting the snapshot, bounded, when it lacks
    a node or the pod), else from the pool, the body streamed to a worker as it arrives
    (a large declared length takes a place in the pool before anything is read, a chunked one
    once it grows past the inline limit: 503 when there is none). bind: at most the inline limit,
    in a thread (a call to the API server)."""
    from django.conf import settings

    inline = settings.SCHEDWEB_EXTENDER_INLINE_BODY_BYTES
    limit = settings.SCHEDWEB_EXTENDER_MAX_BODY_BYTES
    if verb not in _INLINE:  # bind: never offloaded, so never larger than inline
        body = await _read_body(receive, min(limit, inline))
        return await asyncio.to_thread(entry.extender_answer, verb, body)
    declared = _content_length(scope)
    if declared > limit:
        raise _TooLarge(limit)
    body = _Body(receive, limit)
    if declared > inline or scope.get(OFFLOAD_KEY):
        return await _offloaded(verb, body.rest([]))
    held: list[bytes] = []
    size = 0
    while body.more and size <= inline:
        held.append(await body.piece())
        size += len(held[-1])
    if body.more:  # chunked (or longer than declared) past the inline limit
        return await _offloaded(verb, body.rest(held))
    data = b"".join(held)
    if size > inline:
        return await _offloaded(verb, data)
    answer = await _from_memory(partial(entry.extender_answer_or_wait, inline=True), verb, data)
    if isinstance(answer, entry.Waiting):  # the snapshot lacks a node or the pod: it waits
        return await entry.extender_answer_after_wait(answer)
    if answer[0] == entry.OFFLOAD:  # small, but much work (issue 27): a worker answers it
        return await _offloaded(verb, data)
    return answer


async def _offloaded(verb: str, body: bytes | AsyncIterator[bytes]) -> tuple[int, bytes, str]:
    """The pool's answer, or 503 when it has no place (nothing more of the body is read)."""
    pool = _offloader()
    try:
        async with pool.place():
            return await pool.answer(verb, body)
    except Full:
        return busy_answer()


async def admission(scope, receive, send) -> None:
    """POST /admission/queue: kube-apiserver's mutating webhook call for a pod (issue 11),
    on the extender's listener and behind its TLS (mutual TLS: kube-apiserver presents the
    client certificate of its AdmissionConfiguration's kubeconfig). An AdmissionReview of one
    Pod is a few KB: bodies past the inline limit are refused (413). Answered inline from
    memory once the runtime is built, like filter."""
    from django.conf import settings

    if scope["method"] != "POST":
        await _answer(send, 405, b'{"Error": "POST only"}', [(b"allow", b"POST")])
        return
    if not _is_json(scope):
        await _answer(send, 415, _UNSUPPORTED)
        return
    limit = settings.SCHEDWEB_EXTENDER_INLINE_BODY_BYTES
    extra = []
    try:
        body = await _read_body(receive, limit)
    except _ClientGone:
        return
    except _TooLarge:
        status, answer, policy = entry.too_large_answer(limit)
        extra.append((b"connection", b"close"))
    else:
        status, answer, policy = await _from_memory(entry.admission_answer, body)
    if policy:
        extra.append((b"x-schedweb-policy", policy.encode()))
    await _answer(send, status, answer, extra)


async def _lifespan(receive, send, startup=None, *, offload: bool = False, shutdown=None) -> None:
    """Runs `startup` (in a thread) before the listener takes connections and starts the pool
    for large bodies (`offload`); stops the pool and runs `shutdown` at shutdown. Django's
    handler refuses lifespan, so it is answered here."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            if offload:
                pool = _offloader()
                pool.start()
                # the shadow version is judged in the pool's shadow lane, off this loop
                entry.shadow_forward = partial(_shadow_forward, pool)
                entry.shadow_send = pool.forwards_send
            if startup is not None:
                try:
                    await asyncio.to_thread(startup)
                except Exception:  # the first request tries again (and /readyz says why)
                    log.exception("extender start failed")
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            if offload and _offload is not None:
                entry.shadow_forward = None
                entry.shadow_send = None
                _offload.close(wait=True)  # uvicorn's workers end with os._exit: join them now
            if shutdown is not None:
                with contextlib.suppress(Exception):
                    await asyncio.to_thread(shutdown)
            await send({"type": "lifespan.shutdown.complete"})
            return


def _extender_start() -> None:
    """The process's extender runtime, built before the first request: the active policies,
    the snapshot reader and, with bind on, the Kubernetes client (the first bind of each process
    cost 0.25-1 s when it was created there). It reports what it serves: publishers wait for
    this process (policies/publishing.py)."""
    global _ready
    serve_as("listener")
    entry.runtime()
    _ready = True


def _extender_stop() -> None:
    """The listener's worker ends: its runtime stops reporting (publishers no longer wait
    for it)."""
    runtime_stop()


_UNSUPPORTED = b'{"Error": "Content-Type must be application/json"}'
_BAD_HOST = b'{"Error": "Host not allowed"}'
_HEALTHY = b'{"status": "ok"}'
_GET_ONLY = b'{"Error": "GET only"}'


async def extender_application(scope, receive, send) -> None:
    """The extender's listener: /extender/<verb>, /healthz and /readyz, for allowed hosts only."""
    from django.conf import settings

    if scope["type"] == "lifespan":
        await _lifespan(receive, send, _extender_start, offload=True, shutdown=_extender_stop)
        return
    if scope["type"] != "http":  # websockets: nothing here
        return
    path = scope["path"]
    role = (
        client_certs.SCHEDULER
        if path.startswith(entry.PREFIX)
        else client_certs.WEBHOOK
        if path == ADMISSION_PATH
        else ""
    )
    if not _host_allowed(scope, settings.SCHEDWEB_EXTENDER_ALLOWED_HOSTS):
        await _answer(send, 400, _BAD_HOST)
    elif role and not client_certs.may(client := client_certs.scope_client(scope), role):
        # Before the body is read: a certificate without the role sends nothing further.
        status, answer, _policy = await _from_memory(
            partial(entry.refused_answer, kind=role, client=client.name, label=client.label),
            path,
        )
        await _answer(send, status, answer, [(b"connection", b"close")])
    elif scope["path"].startswith(entry.PREFIX):
        await extender(scope, receive, send)
    elif scope["path"] == ADMISSION_PATH:
        await admission(scope, receive, send)
    elif scope["path"] == "/healthz":
        await _answer(send, 200, _HEALTHY)
    elif scope["path"] == "/readyz":  # this listener's processes: what they serve, what is down
        await django_application(scope, receive, send)
    elif scope["path"] == "/metrics":  # the counters of this listener's processes (Prometheus)
        if scope["method"] not in ("GET", "HEAD"):
            await _answer(send, 405, _GET_ONLY, [(b"allow", b"GET, HEAD")])
            return
        text = await asyncio.to_thread(entry.metrics_text)  # reads the workers' files
        await _answer(send, 200, text, content_type=entry.METRICS_CONTENT_TYPE)
    else:
        status, answer, _policy = entry.not_found_answer(scope["path"])
        await _answer(send, status, answer)


async def application(scope, receive, send) -> None:
    """The pages, the API and the ops endpoints; /extender/ is a JSON 404 (its own listener)."""
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] == "http" and scope["path"].startswith(entry.PREFIX):
        status, answer, _policy = entry.not_found_answer(scope["path"])
        await _answer(send, status, answer)
        return
    await django_application(scope, receive, send)
