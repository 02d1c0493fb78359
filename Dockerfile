# One image for web, worker, beat and the one-shot migrate job (docker-compose.yml).
FROM python:3.11-slim AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    DJANGO_SETTINGS_MODULE=config.settings.production FLEET_VAR_DIR=/var/lib/fleet
WORKDIR /app

FROM node:20-slim AS frontend
WORKDIR /frontend
COPY frontend/ ./
RUN if [ -f package.json ]; then npm ci --no-audit --no-fund && npm run build; else mkdir -p dist; fi

FROM base
RUN useradd --system --home /var/lib/fleet --create-home fleet \
    && install -d -o fleet -g fleet /var/lib/fleet/prometheus
COPY pyproject.toml README.md ./
COPY agents/ ./agents/
COPY config/ ./config/
COPY fleet/ ./fleet/
RUN pip install "setuptools>=70" wheel && pip install . ./agents
COPY manage.py ./
COPY --from=frontend /frontend/dist ./frontend/dist
# Static files for whitenoise, and the agent wheels that /install.sh serves to nodes (nvidia-ml-py included,
# for nodes without internet access).
RUN export SECRET_KEY=build-only-$(python -c 'import secrets; print(secrets.token_urlsafe(60))') \
    && python manage.py collectstatic --noinput \
    && python manage.py build_agent_wheels --with-deps
USER fleet
EXPOSE 8000
# --backlog bounds the kernel's accept queue (memory); what bounds the wait is the shedding middleware in
# config/wsgi.py (503 + Retry-After for a request that waited too long, docs/telemetry.md).
CMD ["gunicorn", "config.wsgi", "--bind", "0.0.0.0:8000", "--workers", "4", "--threads", "4", "--backlog", "1024", \
     "--access-logfile", "-"]
