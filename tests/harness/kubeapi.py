"""A deliberately tiny HTTPS/JSON client for the test API server (stdlib only), so that the test
harness does not share code, and bugs, with schedweb's own `kubernetes`-client boundary."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

_PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}


class ApiError(RuntimeError):
    """The API server answered with an error status; `status` is the HTTP code (401, 403, 404...)."""

    def __init__(self, *, method: str, path: str, status: int, reason: str, message: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class KubeApi:
    """Requests to one API server as one bearer token; CA-verified, never logs the token."""

    def __init__(self, *, url: str, ca_file: Path, token: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._tls = ssl.create_default_context(cafile=str(ca_file))

    def __repr__(self) -> str:
        return f"KubeApi(url={self.url!r})"  # the token stays out of reprs and tracebacks

    def request(
        self, method: str, path: str, *, body: Any = None, content_type: str = "application/json"
    ) -> Any:
        """Send one request; the decoded JSON answer (or text), ApiError on a status >= 400."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self._token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=self._timeout, context=self._tls) as resp:
                return _decode(resp.read())
        except urllib.error.HTTPError as err:
            answer = _decode(err.read())
            message = answer.get("message", "") if isinstance(answer, dict) else str(answer)
            reason = answer.get("reason", err.reason) if isinstance(answer, dict) else err.reason
            raise ApiError(
                method=method, path=path, status=err.code, reason=str(reason), message=message
            ) from None

    def get(self, path: str) -> Any:
        """GET `path`."""
        return self.request("GET", path)

    def post(self, path: str, body: Any) -> Any:
        """POST a JSON body (create)."""
        return self.request("POST", path, body=body)

    def put(self, path: str, body: Any) -> Any:
        """PUT a whole object (replace; needs its resourceVersion for optimistic concurrency)."""
        return self.request("PUT", path, body=body)

    def patch(self, path: str, body: Any, *, patch_type: str = "merge") -> Any:
        """PATCH with a merge (default), strategic-merge or JSON patch."""
        if patch_type not in _PATCH_TYPES:
            raise ValueError(
                f"patch_type must be one of {sorted(_PATCH_TYPES)}, not {patch_type!r}"
            )
        return self.request("PATCH", path, body=body, content_type=_PATCH_TYPES[patch_type])

    def delete(self, path: str, *, grace_period_seconds: int | None = None) -> Any:
        """DELETE; a grace period of 0 removes a bound pod at once (no kubelet will confirm it)."""
        body = None
        if grace_period_seconds is not None:
            body = {"kind": "DeleteOptions", "apiVersion": "v1"}
            body["gracePeriodSeconds"] = grace_period_seconds
        return self.request("DELETE", path, body=body)


def _decode(raw: bytes) -> Any:
    text = raw.decode(errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text
