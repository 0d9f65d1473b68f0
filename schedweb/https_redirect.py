"""Production mode's redirect to HTTPS, except for the hosts that reach the web pods without the
TLS proxy (SCHEDWEB_INTERNAL_HOSTS).

Django's SecurityMiddleware redirects every plain-HTTP request when SECURE_SSL_REDIRECT is on,
whatever its Host, so in a cluster `kubectl port-forward svc/<release>-web 8000` (Host
127.0.0.1:8000) and in-cluster clients of the web Service's own name got a 301 to an https://
address nothing serves. With SCHEDWEB_INTERNAL_HOSTS set, the settings turn Django's redirect off
and put this middleware right after SecurityMiddleware: the same 301 for every other host, none for
those. Their cookies stay Secure: browsers keep Secure cookies for http://127.0.0.1 and
http://localhost (loopback origins are trustworthy), and the web Service's name is for API clients.
HSTS, which SecurityMiddleware sends on HTTPS answers only, is unchanged.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.http.request import split_domain_port, validate_host
from django.utils.deprecation import MiddlewareMixin


def host_is_internal(request: HttpRequest) -> bool:
    """True when the request's Host (port aside) is one of SCHEDWEB_INTERNAL_HOSTS (the same
    patterns as ALLOWED_HOSTS)."""
    domain, _port = split_domain_port(request.get_host())
    return bool(domain) and validate_host(domain, settings.SCHEDWEB_INTERNAL_HOSTS)


class HttpsRedirectMiddleware(MiddlewareMixin):
    """301 to https:// for a plain-HTTP request, unless its Host is internal."""

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        if request.is_secure() or host_is_internal(request):
            return None
        host = settings.SECURE_SSL_HOST or request.get_host()
        return HttpResponsePermanentRedirect(f"https://{host}{request.get_full_path()}")
