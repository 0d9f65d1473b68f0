"""Which job a client certificate has on the extender's listener (issue 27).

Under mutual TLS the handshake admits every certificate of SCHEDWEB_EXTENDER_CLIENT_CA, and in
a cluster that CA signs three clients: kube-scheduler (the extender verbs), kube-apiserver's
webhook client (POST /admission/queue) and the in-pod probe (health). Each may do its own job
only: a certificate is named by its subject's commonName and its subjectAltName's DNS and URI
entries, and holds a role when one of its names is in that role's setting
(SCHEDWEB_EXTENDER_SCHEDULER_CLIENTS, SCHEDWEB_EXTENDER_WEBHOOK_CLIENTS; "*": any certificate of
the CA). /healthz, /readyz and /metrics need no role. Worked out once per connection
(schedweb/extender_http.py), from the certificate the TLS layer verified.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SCHEDULER = "scheduler"  # filter, prioritize, preempt, bind
WEBHOOK = "webhook"  # the queue webhook
ANY = "*"
SCOPE_KEY = "schedweb.client"  # the connection's Client in each request's ASGI scope


@dataclass(frozen=True, slots=True)
class Client:
    """A caller under mutual TLS: the roles its certificate holds and a name for the log."""

    roles: frozenset[str]
    name: str

    @property
    def label(self) -> str:
        """A metric label: the role, or "other" (the probe's, or one no setting names)."""
        return next(iter(sorted(self.roles)), "other")


NOBODY = Client(frozenset(), "(no verified certificate)")


def certificate_names(cert: dict[str, Any]) -> list[str]:
    """The names of a certificate as ssl.SSLSocket.getpeercert() gives it: every subject
    commonName, then the DNS and URI subjectAltNames, in order."""
    names = [
        value
        for rdn in cert.get("subject") or ()
        for key, value in rdn
        if key == "commonName" and isinstance(value, str)
    ]
    names += [
        value
        for kind, value in cert.get("subjectAltName") or ()
        if kind in ("DNS", "URI") and isinstance(value, str)
    ]
    return names


def client_from_names(names: list[str], *, scheduler: list[str], webhook: list[str]) -> Client:
    """The roles of a certificate with `names`, under the two settings' lists."""
    roles = set()
    for role, allowed in ((SCHEDULER, scheduler), (WEBHOOK, webhook)):
        if ANY in allowed or any(name in allowed for name in names):
            roles.add(role)
    return Client(frozenset(roles), names[0] if names else "(a certificate without a name)")


def client_of(transport: Any) -> Client | None:
    """The connection's client under mutual TLS (NOBODY when no verified certificate can be
    read), or None when mutual TLS is off: then nothing names a caller and nothing is refused."""
    from django.conf import settings

    if not settings.SCHEDWEB_EXTENDER_CLIENT_CA:
        return None
    ssl_object = transport.get_extra_info("ssl_object")
    cert = ssl_object.getpeercert() if ssl_object is not None else None
    if not cert:
        return NOBODY
    return client_from_names(
        certificate_names(cert),
        scheduler=settings.SCHEDWEB_EXTENDER_SCHEDULER_CLIENTS,
        webhook=settings.SCHEDWEB_EXTENDER_WEBHOOK_CLIENTS,
    )


def scope_client(scope: dict[str, Any]) -> Client | None:
    """The request's client as the listener's protocol put it in the scope; a scope without one
    (an ASGI server other than schedweb's protocol) is nobody under mutual TLS."""
    if SCOPE_KEY in scope:
        return scope[SCOPE_KEY]
    from django.conf import settings

    return NOBODY if settings.SCHEDWEB_EXTENDER_CLIENT_CA else None


def may(client: Client | None, role: str) -> bool:
    """Whether `client` may use a path that needs `role` (always, without mutual TLS)."""
    return client is None or role in client.roles
