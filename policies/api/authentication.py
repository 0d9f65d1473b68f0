"""Per-user API tokens: `Authorization: Bearer swt_...` (or `Token swt_...`)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from policies import throttle
from policies.models import ApiToken
from policies.services import hash_token


class TokenAuthentication(authentication.BaseAuthentication):
    """Looks the token up by its sha256; revoked tokens and inactive users are refused."""

    keywords = ("bearer", "token")

    def authenticate(self, request):
        """The token's user; failures are counted per client address (policies/throttle.py)."""
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower().decode(errors="replace") not in self.keywords:
            return None
        ip = throttle.client_ip(request)
        wait = throttle.token_retry_after(ip)
        if wait:
            raise exceptions.Throttled(
                wait=wait, detail="too many failed token authentications from this address."
            )
        try:
            return self._authenticate(request, header)
        except exceptions.AuthenticationFailed:
            throttle.token_failed(ip)
            raise

    def _authenticate(self, request, header):
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(
                "malformed Authorization header: use 'Bearer <token>'"
            )
        try:
            raw = header[1].decode()
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("the token contains invalid characters") from None
        token = ApiToken.objects.select_related("user").filter(key_hash=hash_token(raw)).first()
        if token is None:
            raise exceptions.AuthenticationFailed("unknown API token")
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed(f"this API token ({token.prefix}…) was revoked")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("the token's user is inactive")
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at > timedelta(minutes=1):
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request) -> str:
        # Makes DRF answer 401 (not 403) when credentials are missing or wrong.
        return 'Bearer realm="schedweb"'


class TokenAuthenticationScheme(OpenApiAuthenticationExtension):
    """Names TokenAuthentication in the OpenAPI schema (the bearerAuth scheme)."""

    target_class = TokenAuthentication
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A schedweb API token (swt_...).",
        }
