"""The product's only Kubernetes I/O: list and watch Nodes and Pods as raw JSON, and the
Namespaces, Services, ReplicaSets, StatefulSets and ReplicationControllers kube-scheduler's
InterPodAffinity (namespaceSelector) and PodTopologySpread (system defaults) read.

The `kubernetes` client is used for what it is good at (kubeconfig and in-cluster
configuration, TLS, authentication, token refresh) and bypassed for what is slow: every call
passes `_preload_content=False` and the bytes are parsed with orjson. Deserialising 50 000
pods into V1Pod models takes minutes; orjson takes about 2 s.

Failures are classified into a `KubeError` whose `kind` the UI shows as is:

    unauthorized  401: the API server rejected the credentials
    forbidden     403: the account needs list and watch on the KINDS below (RBAC); a refused
                  patch or bind says what the API server refused
    unreachable   connection refused, DNS, timeout, TLS: cannot connect to https://...
    gone          410: the resource version is too old; the caller relists (`Gone`)
    config        the kubeconfig / in-cluster configuration cannot be loaded
    error         anything else the API server answered (HTTP 500, 429...)

Tokens and kubeconfig contents are never logged and never put in a message: the client's
debug logging stays off, and every message is scrubbed of the bearer token it uses.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger(__name__)

KINDS = (
    "nodes",
    "pods",
    "namespaces",
    "services",
    "replicasets",
    "statefulsets",
    "replicationcontrollers",
)
# Resource -> the Kind of its objects, for the kinds the snapshot keeps as small views.
OBJECT_RESOURCES = {
    "namespaces": "Namespace",
    "services": "Service",
    "replicasets": "ReplicaSet",
    "statefulsets": "StatefulSet",
    "replicationcontrollers": "ReplicationController",
}
PAGE_SIZE = 500  # items per list page: the API server's recommended chunk size
CONNECT_TIMEOUT = 5.0
LIST_READ_TIMEOUT = 60.0  # per socket read while a page is produced
WATCH_READ_MARGIN = 30.0  # a watch's socket read timeout is its timeoutSeconds plus this
_IN_CLUSTER_ENV = ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")

_FORBIDDEN = (
    "forbidden: the account needs list and watch on nodes, pods, namespaces, services,"
    " replicationcontrollers, and apps replicasets and statefulsets (RBAC)"
)
_UNAUTHORIZED = "unauthorized: the API server rejected the credentials"


class KubeError(Exception):
    """A failed call to the API server; `kind` classifies it (see the module docstring) and
    `str()` is the plain-words message for the UI (never containing a credential)."""

    def __init__(self, kind: str, message: str, *, http_status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.http_status = http_status


class Gone(KubeError):
    """410 Gone: the requested resource version is older than the server keeps; relist."""

    def __init__(self, message: str) -> None:
        super().__init__("gone", message, http_status=410)


@dataclass(frozen=True)
class Listing:
    """One complete list of a kind: raw items (without kind/apiVersion, as lists return
    them) and the list's resourceVersion, where a watch continues."""

    items: list[dict[str, Any]]
    resource_version: str


class LiveClient:
    """Lists and watches Nodes and Pods of one cluster. Configuration is loaded lazily on
    the first call (never at import), from `kubeconfig` + `context`, or in-cluster when no
    kubeconfig is given and the service-account environment is present."""

    def __init__(
        self,
        *,
        kubeconfig: str | os.PathLike[str] | None = None,
        context: str = "",
        page_size: int = PAGE_SIZE,
    ) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be positive, not {page_size}")
        self.kubeconfig = Path(kubeconfig).expanduser() if kubeconfig else None
        self.context = context
        self.page_size = page_size
        self._api: Any = None
        self._apps: Any = None
        self._server = ""
        self._token = ""
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls) -> LiveClient:
        """The client for SCHEDWEB_KUBECONFIG / SCHEDWEB_KUBE_CONTEXT (in-cluster if unset)."""
        from django.conf import settings

        return cls(kubeconfig=settings.SCHEDWEB_KUBECONFIG, context=settings.SCHEDWEB_KUBE_CONTEXT)

    def __repr__(self) -> str:
        return f"LiveClient({self.describe()})"

    # -- configuration --------------------------------------------------------------------

    @property
    def server(self) -> str:
        """The API server URL (loads the configuration); "" if it cannot be loaded."""
        try:
            self._core()
        except KubeError:
            return ""
        return self._server

    def describe(self) -> str:
        """Where this client points, for humans: no credentials."""
        where = f"kubeconfig {self.kubeconfig}" if self.kubeconfig else "in-cluster config"
        if self.context:
            where += f", context {self.context}"
        return f"{self._server} ({where})" if self._server else where

    def _core(self) -> Any:
        """The CoreV1Api, configured on first use."""
        if self._api is not None:
            return self._api
        with self._lock:
            if self._api is None:
                self._api = self._configure()
        return self._api

    def _configure(self) -> Any:
        import urllib3
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException

        configuration = client.Configuration()
        try:
            if self.kubeconfig is not None:
                if not self.kubeconfig.is_file():
                    raise KubeError("config", f"config: no kubeconfig file at {self.kubeconfig}")
                config.load_kube_config(
                    config_file=str(self.kubeconfig),
                    context=self.context or None,
                    client_configuration=configuration,
                    persist_config=False,
                )
            elif all(os.environ.get(name) for name in _IN_CLUSTER_ENV):
                config.load_incluster_config(client_configuration=configuration)
            else:
                raise KubeError(
                    "config",
                    "config: no kubeconfig (SCHEDWEB_KUBECONFIG is unset) and not running in a"
                    " cluster (KUBERNETES_SERVICE_HOST is unset)",
                )
        except ConfigException as exc:
            # The loader's messages name files and contexts, not secrets; scrubbed anyway.
            raise KubeError("config", f"config: {self._scrub(str(exc))}") from None
        except (OSError, ValueError) as exc:  # unreadable file, YAML that is not a kubeconfig
            raise KubeError("config", f"config: cannot load {self.describe()}: {exc}") from None
        configuration.debug = False  # debug logging would print request headers (the token)
        # Retry only connection failures (fast: refused connections fail at once); reads are
        # never retried here, the watcher has its own backoff.
        configuration.retries = urllib3.Retry(
            total=2, connect=2, read=0, status=0, redirect=0, backoff_factor=0.1
        )
        # One long-lived connection per watched kind, plus room for lists and binds: the
        # client's default pool (5 per CPU) is smaller than the watches on a 1-CPU pod, and a
        # full pool discards connections (with a warning) instead of reusing them.
        configuration.connection_pool_maxsize = max(
            configuration.connection_pool_maxsize, len(KINDS) + 4
        )
        self._server = configuration.host
        auth = configuration.api_key.get("authorization") or configuration.api_key.get(
            "BearerToken", ""
        )
        self._token = auth.removeprefix("Bearer ").strip()
        api_client = client.ApiClient(configuration)
        self._apps = client.AppsV1Api(api_client)
        return client.CoreV1Api(api_client)

    def _scrub(self, text: str) -> str:
        return text.replace(self._token, "<token>") if self._token else text

    # -- list ---------------------------------------------------------------------------------

    def list(self, kind: str) -> Listing:
        """Every object of `kind` (one of KINDS, all namespaces) in pages of
        `page_size`. A continue token that expires mid-list (410) restarts the list once."""
        for attempt in range(2):
            try:
                return self._list_pages(kind)
            except Gone:
                if attempt:
                    raise
                log.info("the %s list expired mid-way (410); listing again", kind)
        raise AssertionError("unreachable")  # pragma: no cover

    def list_nodes(self) -> Listing:
        """All nodes (see `list`)."""
        return self.list("nodes")

    def list_pods(self) -> Listing:
        """All pods of all namespaces (see `list`)."""
        return self.list("pods")

    def _list_pages(self, kind: str) -> Listing:
        call = self._call_for(kind)
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            kwargs: dict[str, Any] = {"limit": self.page_size}
            if token:
                kwargs["_continue"] = token
            page = self._request_json(call, kwargs, timeout=(CONNECT_TIMEOUT, LIST_READ_TIMEOUT))
            if type(page) is not dict or type(page.get("items", [])) is not list:
                raise KubeError("error", f"error: the {kind} list is not a list object")
            items.extend(page.get("items") or ())
            meta = page.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                return Listing(items=items, resource_version=str(meta.get("resourceVersion", "")))

    def _request_json(self, call: Any, kwargs: dict[str, Any], *, timeout: tuple) -> Any:
        response = self._open(call, kwargs, timeout=timeout)
        try:
            data = response.data
        except Exception as exc:  # the connection broke while the body was read
            raise self._classify(exc) from None
        finally:
            response.release_conn()
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise KubeError("error", f"error: the API server sent invalid JSON: {exc}") from None

    def _open(self, call: Any, kwargs: dict[str, Any], *, timeout: tuple) -> Any:
        try:
            return call(**kwargs, _preload_content=False, _request_timeout=timeout)
        except KubeError:
            raise
        except Exception as exc:
            raise self._classify(exc) from None

    def _call_for(self, kind: str) -> Any:
        api = self._core()
        calls = {
            "nodes": api.list_node,
            "pods": api.list_pod_for_all_namespaces,
            "namespaces": api.list_namespace,
            "services": api.list_service_for_all_namespaces,
            "replicationcontrollers": api.list_replication_controller_for_all_namespaces,
            "replicasets": self._apps.list_replica_set_for_all_namespaces,
            "statefulsets": self._apps.list_stateful_set_for_all_namespaces,
        }
        if kind not in calls:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        return calls[kind]

    # -- watch --------------------------------------------------------------------------------

    def watch(self, kind: str, *, resource_version: str, timeout_seconds: int) -> WatchStream:
        """Opens a watch of `kind` from `resource_version` with bookmarks; the server ends it
        after `timeout_seconds`. Raises KubeError (Gone for 410) if it cannot be opened."""
        if timeout_seconds < 1:
            raise ValueError(f"timeout_seconds must be positive, not {timeout_seconds}")
        call = self._call_for(kind)
        response = self._open(
            call,
            {
                "watch": True,
                "resource_version": resource_version,
                "allow_watch_bookmarks": True,
                "timeout_seconds": timeout_seconds,
            },
            timeout=(CONNECT_TIMEOUT, timeout_seconds + WATCH_READ_MARGIN),
        )
        return WatchStream(response, kind=kind, client=self)

    # -- bind -----------------------------------------------------------------------------------

    def bind(self, *, namespace: str, name: str, uid: str, node: str) -> None:
        """Places a pod on a node through pods/binding, as kube-scheduler's DefaultBinder
        does (the uid is a precondition: a recreated pod of the same name is not bound)."""
        metadata = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            response = self._open(
                self._core().create_namespaced_pod_binding,
                {"name": name, "namespace": namespace, "body": body},
                timeout=(CONNECT_TIMEOUT, 10.0),
            )
        except KubeError as exc:
            if exc.http_status != 409:
                raise
            # 409: already bound, or the uid precondition failed (a recreated pod). kube-scheduler
            # retries binds whose answer it lost, so a bind to the node the pod is on succeeds.
            current = self.pod_node(namespace=namespace, name=name)
            if current == node:
                return
            if current:
                raise KubeError(
                    "conflict", f"pod is already bound to {current}", http_status=409
                ) from None
            raise
        response.read()  # drain it: a connection returned unread would break the next request
        response.release_conn()

    def annotate_pod(self, *, namespace: str, name: str, annotations: dict[str, str]) -> None:
        """Merge-patches annotations onto a pod (the requeue nudge: an update to a pending pod
        makes kube-scheduler reconsider it)."""
        response = self._open(
            self._core().patch_namespaced_pod,
            {
                "name": name,
                "namespace": namespace,
                "body": {"metadata": {"annotations": annotations}},
            },
            timeout=(CONNECT_TIMEOUT, 10.0),
        )
        response.read()
        response.release_conn()

    def priority_class_names(self) -> set[str]:
        """Names of the cluster's PriorityClasses (the queue classes the worker manages)."""
        from kubernetes import client as k8s

        api = k8s.SchedulingV1Api(self._core().api_client)
        response = self._open(
            api.list_priority_class, {"limit": 5000}, timeout=(CONNECT_TIMEOUT, 30.0)
        )
        try:
            data = orjson.loads(response.read())
        finally:
            response.release_conn()
        return {item["metadata"]["name"] for item in data.get("items") or []}

    def priority_class_create(self, manifest: dict[str, Any]) -> None:
        """Creates a PriorityClass; one that exists already (another worker) is fine."""
        from kubernetes import client as k8s

        api = k8s.SchedulingV1Api(self._core().api_client)
        try:
            response = self._open(
                api.create_priority_class, {"body": manifest}, timeout=(CONNECT_TIMEOUT, 10.0)
            )
        except KubeError as exc:
            if exc.http_status == 409:
                return
            raise
        response.read()
        response.release_conn()

    def request_json(self, method: str, path: str, body: Any = None) -> Any:
        """A JSON request to any API path (APIs the generated client lacks: the alpha Workload
        API); KubeError on failure, with the HTTP status (404: the API is not served)."""

        def call(**kwargs: Any) -> Any:
            return self._core().api_client.call_api(
                path,
                method,
                header_params={"Accept": "application/json", "Content-Type": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                **kwargs,
            )

        response = self._open(call, {}, timeout=(CONNECT_TIMEOUT, 30.0))
        try:
            return orjson.loads(response.read() or b"null")
        finally:
            response.release_conn()

    def pod_node(self, *, namespace: str, name: str) -> str:
        """The node a pod is bound to ("" while pending)."""
        response = self._open(
            self._core().read_namespaced_pod,
            {"name": name, "namespace": namespace},
            timeout=(CONNECT_TIMEOUT, 10.0),
        )
        try:
            data = orjson.loads(response.read())
        finally:
            response.release_conn()
        return (data.get("spec") or {}).get("nodeName") or ""

    # -- errors -------------------------------------------------------------------------------

    def _classify(self, exc: BaseException) -> KubeError:
        """Any exception of a call -> a KubeError in plain words."""
        from kubernetes.client.exceptions import ApiException

        if isinstance(exc, KubeError):
            return exc
        if isinstance(exc, ApiException):
            return self._from_status(exc.status, exc.reason, _body_message(exc.body))
        return KubeError(
            "unreachable", f"unreachable: cannot connect to {self._server}: {self._reason(exc)}"
        )

    def _from_status(self, status: int | None, reason: Any, detail: str) -> KubeError:
        detail = self._scrub(detail)
        if status == 401:
            return KubeError("unauthorized", _UNAUTHORIZED, http_status=401)
        if status == 403:
            # The watcher's lists and watches get the whole list of what it needs; a refused
            # patch (requeue nudge) or bind says what was refused, in the API server's words.
            if not detail or re.search(r"cannot (list|watch) ", detail):
                message = f"{_FORBIDDEN}: {detail}" if detail else _FORBIDDEN
            else:
                message = f"forbidden (RBAC): {detail}"
            return KubeError("forbidden", message, http_status=403)
        if status == 410:
            return Gone(f"gone: {detail or 'the resource version is too old'}")
        if not status:  # the client reports TLS failures as status 0
            text = self._scrub(str(reason or detail))
            short = _known_reason(text) or "TLS error: " + " ".join(text.split())[:200]
            return KubeError(
                "unreachable", f"unreachable: cannot connect to {self._server}: {short}"
            )
        text = detail or str(reason or "")
        return KubeError(
            "error", f"error: the API server answered HTTP {status}: {text}", http_status=status
        )

    def _reason(self, exc: BaseException) -> str:
        """The root cause of a connection failure, short ("connection refused")."""
        seen = exc
        for _ in range(6):  # urllib3 wraps: MaxRetryError -> NewConnectionError -> OSError
            inner = getattr(seen, "reason", None) or seen.__cause__ or seen.__context__
            if inner is None or inner is seen or not isinstance(inner, BaseException):
                break
            seen = inner
        text = str(seen)
        return _known_reason(text) or self._scrub(f"{type(seen).__name__}: {text}")[:300]


class WatchStream:
    """One open watch response: iterating yields (type, object) with type ADDED, MODIFIED,
    DELETED or BOOKMARK, until the server ends the watch. An ERROR event raises (Gone for
    410); a broken connection raises KubeError("unreachable"). `close()` may be called from
    another thread: the blocked read returns and the iteration simply ends."""

    def __init__(self, response: Any, *, kind: str, client: LiveClient) -> None:
        self.kind = kind
        self._response = response
        self._client = client
        self._closed = False

    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        buffer = bytearray()
        try:
            for chunk in self._response.stream(None, decode_content=True):
                if self._closed:
                    return
                buffer += chunk
                start = 0
                while True:
                    end = buffer.find(b"\n", start)
                    if end < 0:
                        break
                    line = bytes(buffer[start:end])
                    start = end + 1
                    if line.strip():
                        yield self._event(line)
                if start:
                    del buffer[:start]
            if buffer.strip() and not self._closed:
                yield self._event(bytes(buffer))
        except KubeError:
            raise
        except Exception as exc:
            if self._closed:
                return  # closed from another thread: the read error is ours
            raise self._client._classify(exc) from None
        finally:
            self._release()

    def _event(self, line: bytes) -> tuple[str, dict[str, Any]]:
        try:
            event = orjson.loads(line)
            kind, obj = event["type"], event["object"]
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise KubeError("error", f"error: unreadable {self.kind} watch event: {exc}") from None
        if kind == "ERROR":
            status = obj if type(obj) is dict else {}
            raise self._client._from_status(
                status.get("code"), status.get("reason"), str(status.get("message", ""))
            )
        if type(obj) is not dict:
            raise KubeError("error", f"error: a {self.kind} watch event without an object")
        return kind, obj

    def close(self) -> None:
        """Ends the watch now, from any thread (urllib3's shutdown() unblocks the read)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):  # already closed: nothing to stop
            self._response.shutdown()

    def _release(self) -> None:
        # A watch read to its end returns its connection to the pool; one cut short is
        # closed (its socket may be mid-chunk).
        with contextlib.suppress(Exception):
            if self._closed:
                self._response.close()
            else:
                self._response.release_conn()


_REASONS = (
    ("connection refused", "connection refused"),
    ("name or service not known", "unknown host (DNS)"),
    ("temporary failure in name resolution", "unknown host (DNS)"),
    ("nodename nor servname", "unknown host (DNS)"),
    ("no address associated", "unknown host (DNS)"),
    ("certificate verify failed", "TLS certificate verification failed"),
    ("timed out", "timed out"),
    ("connection reset", "connection reset"),
    ("broken pipe", "connection lost"),
    ("remote end closed", "connection closed by the server"),
    ("response ended prematurely", "connection closed by the server"),
    ("connection aborted", "connection lost"),
)


def _known_reason(text: str) -> str:
    """A connection failure in a few words, if its text names a known cause."""
    lowered = text.lower()
    for needle, short in _REASONS:
        if needle in lowered:
            return short
    return ""


def _body_message(body: Any) -> str:
    """The `message` of a Status body, else the body's text (shortened)."""
    if not body:
        return ""
    if isinstance(body, bytes | bytearray):
        body = body.decode(errors="replace")
    try:
        data = orjson.loads(body)
    except (orjson.JSONDecodeError, TypeError):
        return str(body).strip()[:300]
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"])[:500]
    return str(body).strip()[:300]


_binder: LiveClient | None = None
_binder_lock = threading.Lock()


def binder_client() -> LiveClient:
    """The process's client for binds, created and configured once, at the extender listener's
    start (its ASGI lifespan): importing the kubernetes package and loading the configuration
    cost 0.25-1 s, which the first bind of each process used to pay."""
    global _binder
    with _binder_lock:
        if _binder is None:
            _binder = LiveClient.from_settings()
            if not _binder.server:  # loads the configuration now; a bind retries it
                log.warning(
                    "bind: cannot load the Kubernetes configuration (%s)", _binder.describe()
                )
        return _binder


def bind_pod(args: Any) -> str:
    """The extender's bind verb (args: PodName/PodNamespace/PodUID/Node, see
    policies.extender.protocol.BindingArgs): "" when bound, else the error for kube-scheduler."""
    try:
        binder_client().bind(
            namespace=args.pod_namespace, name=args.pod_name, uid=args.pod_uid, node=args.node
        )
    except KubeError as exc:
        return f"binding {args.pod_namespace}/{args.pod_name} to {args.node} failed: {exc}"
    return ""
