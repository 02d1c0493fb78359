import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

from fleet.core.overload import wrap  # noqa: E402 (needs the settings module chosen above)

# Requests that waited too long for a worker are shed with 503 + Retry-After before Django sees them.
application = wrap(get_wsgi_application())

# Before this worker accepts connections: what its first agent report would otherwise compile while the requests
# behind it queue (and are shed).
from fleet.telemetry.validation import warm_up  # noqa: E402

warm_up()
