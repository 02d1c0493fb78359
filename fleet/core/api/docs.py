"""The OpenAPI schema and its Swagger UI, public only where API_DOCS_PUBLIC says so.

The schema lists every endpoint, parameter and enum of a deployment; production keeps it behind a sign-in
(any role) unless the operator opts in. Local development defaults to public.
"""

from django.conf import settings
from django.http import HttpResponse
from django.utils.html import escape
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework import exceptions, permissions
from rest_framework.renderers import JSONRenderer


class APIDocsPermission(permissions.BasePermission):
    message = "The API schema and docs need a signed-in user (API_DOCS_PUBLIC is off)."

    def has_permission(self, request, view):
        return settings.API_DOCS_PUBLIC or bool(request.user and request.user.is_authenticated)


class APISchemaView(SpectacularAPIView):
    permission_classes = [APIDocsPermission]

    def finalize_response(self, request, response, *args, **kwargs):
        # The schema's first renderer is YAML; an error is the API's JSON error shape like everywhere else.
        if response.status_code >= 400:
            request.accepted_renderer, request.accepted_media_type = JSONRenderer(), JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


SIGN_IN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>API docs — sign in</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 3rem auto; line-height: 1.5">
<h1>Sign in to read the API docs</h1>
<p>{message}</p>
<p><a href="/login">Sign in to the console</a>, then reload this page.</p>
</body></html>
"""


class APIDocsView(SpectacularSwaggerView):
    permission_classes = [APIDocsPermission]

    def handle_exception(self, exc):
        # The Swagger page is HTML for a browser: a sign-in hint, not a JSON error or a bare status line.
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.PermissionDenied):
            return HttpResponse(SIGN_IN_PAGE.format(message=escape(APIDocsPermission.message)), status=401,
                                content_type="text/html; charset=utf-8", headers={"WWW-Authenticate": "Token"})
        return super().handle_exception(exc)
