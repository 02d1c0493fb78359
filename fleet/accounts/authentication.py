from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from rest_framework import authentication, exceptions

from fleet.core.secrets import hash_secret

from .models import APIToken


class APITokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Token <key>` (or `Bearer <key>`). Hashed keys, expiry, revocation, write flag."""

    keywords = ("token", "bearer")

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower().decode(errors="replace") not in self.keywords:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header: expected 'Token <key>'.")
        key = header[1].decode(errors="replace")
        try:
            token = APIToken.objects.select_related("user").get(key_hash=hash_secret(key))
        except APIToken.DoesNotExist:
            raise exceptions.AuthenticationFailed("Invalid API token.") from None
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed("API token has been revoked.")
        now = timezone.now()
        if token.expires_at is not None and token.expires_at <= now:
            raise exceptions.AuthenticationFailed("API token has expired.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User is inactive.")
        resolution = timedelta(seconds=settings.API_TOKEN_LAST_USED_RESOLUTION_S)
        if token.last_used_at is None or now - token.last_used_at > resolution:
            # At most one write a minute per token, to spare the database on busy clients.
            APIToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request):
        return "Token"
