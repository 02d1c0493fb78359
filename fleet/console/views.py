"""The console's HTML shell. Assets are static files (whitenoise under /static/); every console route
(`/`, `/nodes/12`, `/findings`, …) gets the same index.html and the browser router takes it from there."""

from pathlib import Path

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_safe

NOT_BUILT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>GPU Fleet Console — not built</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 3rem auto; line-height: 1.5">
<h1>The console has not been built</h1>
<p>Run <code>make frontend</code> (or <code>cd frontend &amp;&amp; npm ci &amp;&amp; npm run build</code>), then reload.
<code>make run</code> builds it for you.</p>
<p>The REST API works without it: <a href="/api/docs/">/api/docs/</a>.</p>
</body></html>
"""


def index_path() -> Path:
    return Path(getattr(settings, "CONSOLE_INDEX", settings.BASE_DIR / "frontend" / "dist" / "index.html"))


@require_safe
@ensure_csrf_cookie
def console(request: HttpRequest, path: str = "") -> HttpResponse:
    try:
        # Read on each request (a few hundred bytes) so a rebuilt console shows without a restart.
        html = index_path().read_bytes()
    except FileNotFoundError:
        return HttpResponse(NOT_BUILT, status=503, content_type="text/html; charset=utf-8")
    response = HttpResponse(html, content_type="text/html; charset=utf-8")
    # The shell names hashed asset files; it must never be cached past a deploy.
    response["Cache-Control"] = "no-cache"
    return response
