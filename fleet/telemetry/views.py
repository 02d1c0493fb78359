"""Plain Django views outside the REST API: Prometheus metrics and the agent installer."""

import hmac
import re
from pathlib import Path

from django.conf import settings
from django.http import FileResponse, Http404, HttpResponse
from django.template.loader import render_to_string
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from . import metrics
from .api.views import public_url

_WHEEL_NAME = re.compile(r"^[A-Za-z0-9_.\-]+\.whl$")


@never_cache
@require_GET
def metrics_view(request):
    if settings.METRICS_TOKEN:
        # RFC 6750: `Authorization: Bearer <token>` (scheme case-insensitive). A bare token is refused, so a
        # header meant for another scheme is never taken for this one.
        scheme, _, supplied = request.headers.get("Authorization", "").strip().partition(" ")
        supplied = supplied.strip() if scheme.lower() == "bearer" else ""
        if not supplied or not hmac.compare_digest(supplied.encode(), settings.METRICS_TOKEN.encode()):
            return HttpResponse("metrics need a bearer token\n", status=401, content_type="text/plain",
                                headers={"WWW-Authenticate": "Bearer"})
    return HttpResponse(metrics.render(), content_type=CONTENT_TYPE_LATEST)


def wheel_dir() -> Path:
    return Path(settings.AGENT_WHEEL_DIR)


@require_GET
def install_script(request):
    wheels = sorted(p.name for p in wheel_dir().glob("*.whl")) if wheel_dir().exists() else []
    agent = next((w for w in wheels if w.startswith("fleet_agent-")), "")
    body = render_to_string("telemetry/install.sh", {
        "server": public_url(request), "agent_wheel": agent,
        "offline_wheels": " ".join(w for w in wheels if w != agent),
        "unit": (settings.BASE_DIR / "agents" / "systemd" / "fleet-agent.service").read_text(),
    })
    return HttpResponse(body, content_type="text/x-shellscript; charset=utf-8")


@require_GET
def agent_file(request, name: str):
    if not _WHEEL_NAME.match(name):
        raise Http404("no such file")
    path = wheel_dir() / name
    if not path.is_file():
        raise Http404("no such file")
    return FileResponse(path.open("rb"), as_attachment=True, filename=name)


@require_GET
def agent_index(request):
    names = sorted(p.name for p in wheel_dir().glob("*.whl")) if wheel_dir().exists() else []
    return HttpResponse("\n".join(names) + ("\n" if names else ""), content_type="text/plain")
