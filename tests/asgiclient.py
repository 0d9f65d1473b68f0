"""Requests through schedweb.asgi's applications, as uvicorn serves them, in process: tests reach
the extender (extender_application, its own listener) the way kube-scheduler's calls do."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import orjson


@dataclass(frozen=True, slots=True)
class AsgiResponse:
    """Status, headers (lower-cased names) and body; `response["X-Name"]` reads a header."""

    status_code: int
    headers: dict[str, str]
    content: bytes

    def __getitem__(self, name: str) -> str:
        return self.headers[name.lower()]

    def json(self):
        return orjson.loads(self.content)


def run(coroutine) -> None:
    """asyncio.run in a thread of its own: the browser tests' Playwright keeps an event loop
    running in the main thread for the whole session."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, coroutine).result()


def asgi_request(
    method: str,
    path: str,
    body: bytes = b"",
    *,
    chunk: int = 0,
    app: str = "",
    host: bytes = b"127.0.0.1",
    content_type: bytes | None = b"application/json",
) -> AsgiResponse:
    """One HTTP request through schedweb.asgi; the body in `chunk`-byte messages. `app` is
    "extender" (extender_application) or "web" (application); by default the extender's for
    paths under /extender/, the web's otherwise."""
    from schedweb import asgi

    if not app:
        app = "extender" if path.startswith("/extender/") else "web"
    application = asgi.extender_application if app == "extender" else asgi.application
    headers = [(b"host", host)] if host is not None else []
    if content_type is not None:
        headers.append((b"content-type", content_type))
    headers.append((b"content-length", str(len(body)).encode()))

    parts = [body[i : i + chunk] for i in range(0, len(body), chunk)] if chunk else [body]
    messages = [
        {"type": "http.request", "body": part, "more_body": i < len(parts) - 1}
        for i, part in enumerate(parts)
    ]
    sent: list[dict] = []

    async def receive() -> dict:
        if messages:
            return messages.pop(0)
        await asyncio.Event().wait()  # the client stays connected until the answer is sent
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    run(application(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    return AsgiResponse(start["status"], headers, payload)


def extender_post(verb: str, body: bytes) -> AsgiResponse:
    """POST /extender/<verb> as kube-scheduler sends it."""
    return asgi_request("POST", f"/extender/{verb}", body)


def asgi_lifespan_startup(*, app: str) -> list[dict]:
    """Sends lifespan.startup to schedweb.asgi's `app` ("extender" or "web"), as uvicorn does
    before taking connections; the messages the application sent back."""
    from schedweb import asgi

    application = asgi.extender_application if app == "extender" else asgi.application
    sent: list[dict] = []
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]

    async def receive() -> dict:
        return messages.pop(0)

    async def send(message: dict) -> None:
        sent.append(message)

    run(application({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send))
    return sent
