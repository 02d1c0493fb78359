"""Settings shared by every environment. Every value comes from the environment with a safe default;
`.env.example` lists them all."""

import ipaddress
import re
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from .env import env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(env_str("FLEET_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "fleet.core",
    "fleet.accounts",
    "fleet.inventory",
    "fleet.telemetry",
    "fleet.billing",
    "fleet.health",
    "fleet.remediation",
    "fleet.integrations",
    "fleet.executors",
    "fleet.console",
    "fleet.demo",
]

MIDDLEWARE = [
    # A queued steady-state agent report is answered here, before the rest of the chain (fleet/telemetry/middleware.py).
    "fleet.telemetry.middleware.AgentReportFastLaneMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "fleet.core.api.http.APIInputGuardMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Server-written texts (findings, triage, the rule catalogue) in the request's language (Accept-Language).
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "fleet.core.audit.AuditActorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
AUTH_USER_MODEL = "accounts.User"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "config" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def _database(url: str) -> dict:
    config = dj_database_url.parse(url, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60))
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # WAL lets the web process, the worker, beat and the demo agents read while one writes;
        # IMMEDIATE transactions take the write lock up front instead of failing on upgrade.
        config["CONN_MAX_AGE"] = 0
        config["OPTIONS"] = {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=20000;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        }
    else:
        # A persistent connection is checked (one `SELECT 1`) at the start of each request that reuses it, so a
        # restarted database costs no failed request. Off saves a round trip per request; after a database
        # restart each worker then fails one request and reconnects.
        config["CONN_HEALTH_CHECKS"] = env_bool("DATABASE_CONN_HEALTH_CHECKS", True)
        if env_bool("DATABASE_PGBOUNCER_TRANSACTION_MODE", False):
            # Behind PgBouncer in transaction mode consecutive transactions may run on different server
            # connections, so no server-side (named) cursors, which `.iterator()` would otherwise open. (Django
            # already turns psycopg's automatic prepared statements off.) See docs/deploy.md.
            config["DISABLE_SERVER_SIDE_CURSORS"] = True
    return config


DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'fleet.sqlite3'}")
DATABASES = {"default": _database(DATABASE_URL)}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# How long an admin-issued password reset link works (Django's signed, single-use token; docs/security.md).
PASSWORD_RESET_TIMEOUT = env_int("PASSWORD_RESET_TIMEOUT_S", 24 * 3600)

# Without Accept-Language the API, tickets and integrations speak English (docs/health.md, "Server texts…").
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "fleet" / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [d for d in [BASE_DIR / "frontend" / "dist"] if d.exists()]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

LOGIN_URL = "/admin/login/"

# --- REST API -------------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "fleet.accounts.authentication.APITokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["fleet.accounts.permissions.RolePermission"],
    # Every body the API reads goes through these: size, nesting depth, NUL and 64-bit integer limits.
    "DEFAULT_PARSER_CLASSES": [
        "fleet.core.api.parsers.JSONParser",
        "fleet.core.api.parsers.FormParser",
        "fleet.core.api.parsers.MultiPartParser",
    ],
    "DEFAULT_FILTER_BACKENDS": [
        "fleet.core.api.filters.KnownQueryParamsBackend",
        "fleet.core.api.filters.FleetFilterBackend",
        "fleet.core.api.filters.FleetSearchFilter",
        "fleet.core.api.filters.FleetOrderingFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "fleet.core.api.pagination.FleetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "fleet.core.api.errors.exception_handler",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    # Proxies in front of the web tier whose X-Forwarded-For is trusted for the client's address (throttles).
    # 0: REMOTE_ADDR only; DRF's own default (None) would believe any X-Forwarded-For a client sends.
    "NUM_PROXIES": env_int("NUM_PROXIES", 0),
    "DEFAULT_THROTTLE_RATES": {"agent": env_str("AGENT_RATE_LIMIT", "120/min"),
                               "enroll": env_str("ENROLL_RATE_LIMIT", "600/min"),
                               "integration_inbound": env_str("INTEGRATIONS_INBOUND_RATE_LIMIT", "600/min")},
}

SPECTACULAR_SETTINGS = {
    "TITLE": "GPU Fleet Control Plane API",
    "DESCRIPTION": "Inventory, telemetry, health triage, responsibility boundaries, billing and remediation "
    "for GPU nodes on clouds and bare metal.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Choice sets shared by several apps' APIs get one name each (drf-spectacular warns on collisions).
    "ENUM_NAME_OVERRIDES": {
        "FindingStateEnum": "fleet.health.choices.FindingState",
        "NodeStateEnum": "fleet.inventory.choices.NodeState",
        "OwnerEnum": "fleet.inventory.choices.Owner",
        "PreemptionSourceEnum": "fleet.billing.choices.PreemptionSource",
        "XidPolicyActionEnum": "fleet.health.choices.XidAction",
        "SeverityEnum": "fleet.health.choices.Severity",
        "LayerEnum": "fleet.inventory.choices.Layer",
        "DeliveryFormEnum": "fleet.inventory.choices.DeliveryForm",
        "BillingModeEnum": "fleet.inventory.choices.BillingMode",
        "IncidentStateEnum": "fleet.remediation.choices.IncidentState",
        "BreakerScopeEnum": "fleet.remediation.choices.BreakerScope",
        "ScopeEnum": "fleet.billing.choices.PlanScope",
        "StatusEnum": "fleet.health.choices.CheckStatus",
        "BreakerStateEnum": "fleet.remediation.choices.BreakerState",
        "ConnectorKindEnum": "fleet.integrations.choices.ConnectorKind",
        "TicketActionEnum": "fleet.integrations.choices.TicketAction",
        "MessageStateEnum": "fleet.integrations.choices.MessageState",
        "TicketStateEnum": "fleet.integrations.choices.TicketState",
        "OverrideKindEnum": "fleet.remediation.choices.OverrideKind",
        "NodeEventKindEnum": "fleet.telemetry.choices.EventKind",
    },
}

# --- Celery ---------------------------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL", "")
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL or "filesystem://")
CELERY_RESULT_BACKEND = env_str(
    "CELERY_RESULT_BACKEND", REDIS_URL or f"file://{VAR_DIR / 'celery-results'}"
)
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = VAR_DIR / "broker"
    for _sub in ("queue", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
if CELERY_RESULT_BACKEND.startswith("file://"):
    (VAR_DIR / "celery-results").mkdir(parents=True, exist_ok=True)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 300)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 240)
# A task killed mid-way (worker lost, OOM, deploy) goes back to the queue instead of vanishing.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Deployments sharing one Redis keep apart by queue name.
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_TASK_DEFAULT_QUEUE", "celery")
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 3600
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Every periodic task, in one place. Each is a thin wrapper around a service of the same name.
# The fleet cycle and the silence sweep expire after one interval: one that waited that long behind other tasks (a
# slow cycle, a busy worker) is dropped, since the next one is already due, instead of running back to back with it.
_HEALTH_EVAL_INTERVAL_S = env_int("HEALTH_EVAL_INTERVAL_S", 15)
CELERY_BEAT_SCHEDULE: dict = {
    "health-evaluate-fleet": {"task": "health.evaluate_fleet", "schedule": _HEALTH_EVAL_INTERVAL_S,
                              "options": {"expires": _HEALTH_EVAL_INTERVAL_S}},
    "telemetry-mark-silent-nodes": {"task": "telemetry.mark_silent_nodes", "schedule": 15, "options": {"expires": 15}},
    "telemetry-rollup-history": {"task": "telemetry.rollup_history", "schedule": 300},
    "telemetry-prune-history": {"task": "telemetry.prune_history", "schedule": 3600},
    "telemetry-create-history-partitions": {"task": "telemetry.create_history_partitions", "schedule": 3600},
    "billing-evaluate-terms": {"task": "billing.check_reserved_terms", "schedule": 3600},
    "billing-close-cost-day": {"task": "billing.close_cost_day", "schedule": 3600},
    "remediation-sweep": {"task": "remediation.sweep", "schedule": env_int("REMEDIATION_SWEEP_INTERVAL_S", 15)},
    "integrations-deliver-due": {"task": "integrations.deliver_due",
                                 "schedule": env_int("INTEGRATIONS_SWEEP_INTERVAL_S", 10)},
}

# --- Logging --------------------------------------------------------------------------------------
LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # asyncssh logs every connection and command at INFO: too much for a fleet, and commands are ours to log.
    "loggers": {"django.db.backends": {"level": "INFO"}, "asyncssh": {"level": "WARNING"}},
}

# --- Product settings -----------------------------------------------------------------------------
FLEET_DEFAULT_REPORT_INTERVAL_S = env_int("FLEET_REPORT_INTERVAL_S", 15)
API_TOKEN_LAST_USED_RESOLUTION_S = 60
TELEMETRY_RAW_RETENTION_HOURS = env_int("TELEMETRY_RAW_RETENTION_HOURS", 24)
# History keeps one row per node and per GPU per this many seconds (mean, min and max of the reports inside);
# the latest status still changes on every report. Must divide the 5-minute rollup bucket.
TELEMETRY_HISTORY_RESOLUTION_S = env_int("TELEMETRY_HISTORY_RESOLUTION_S", 60)
if not 1 <= TELEMETRY_HISTORY_RESOLUTION_S <= 300 or 300 % TELEMETRY_HISTORY_RESOLUTION_S:
    raise ImproperlyConfigured("TELEMETRY_HISTORY_RESOLUTION_S must divide 300 (e.g. 15, 30, 60, 300)")
# PostgreSQL: daily history partitions are created this many days ahead (and on demand by ingest).
TELEMETRY_PARTITIONS_AHEAD_DAYS = env_int("TELEMETRY_PARTITIONS_AHEAD_DAYS", 3)
TELEMETRY_ROLLUP_RETENTION_DAYS = env_int("TELEMETRY_ROLLUP_RETENTION_DAYS", 30)
TELEMETRY_EVENT_RETENTION_DAYS = env_int("TELEMETRY_EVENT_RETENTION_DAYS", 365)
AGENT_MAX_BODY_BYTES = env_int("AGENT_MAX_BODY_BYTES", 4 * 1024 * 1024)
# What one agent request may write: events kept per report and per batch (urgent kinds first; the rest are
# dropped and counted), and GPU rows per node (present or departed; new uuids past it are dropped and counted).
AGENT_MAX_EVENTS_PER_REPORT = env_int("AGENT_MAX_EVENTS_PER_REPORT", 200)
AGENT_MAX_EVENTS_PER_BATCH = env_int("AGENT_MAX_EVENTS_PER_BATCH", 1000)
AGENT_MAX_GPUS_PER_NODE = env_int("AGENT_MAX_GPUS_PER_NODE", 64)
# How long an operator's "allow re-enrolment" for a node lasts unless the request says otherwise.
REENROLLMENT_APPROVAL_MINUTES = env_int("REENROLLMENT_APPROVAL_MINUTES", 60)
# Deepest JSON nesting any API body may have (the agent's reports have their own limit).
API_JSON_MAX_DEPTH = env_int("API_JSON_MAX_DEPTH", 32)
# /api/schema/ and /api/docs/ without signing in: off by default (local settings turn it on).
API_DOCS_PUBLIC = env_bool("API_DOCS_PUBLIC", False)
# New API tokens: read-only unless asked for, expiring after the default; no token may live longer than the max.
API_TOKEN_DEFAULT_TTL_DAYS = env_int("API_TOKEN_DEFAULT_TTL_DAYS", 90)
API_TOKEN_MAX_TTL_DAYS = env_int("API_TOKEN_MAX_TTL_DAYS", 365)
# Login throttle (API session login and /admin/login/), checked before any password is hashed: attempts per
# source address (DRF rate syntax; blank = off), and a per-username back-off after this many failures in a
# row, starting at BASE seconds and doubling per further failure up to MAX.
LOGIN_RATE_LIMIT = env_str("LOGIN_RATE_LIMIT", "20/min")
if LOGIN_RATE_LIMIT and not re.fullmatch(r"\d+/(s|sec|second|m|min|minute|h|hour|d|day)", LOGIN_RATE_LIMIT):
    raise ImproperlyConfigured(f"LOGIN_RATE_LIMIT={LOGIN_RATE_LIMIT!r} is not a rate such as 20/min")
LOGIN_LOCKOUT_FAILURES = env_int("LOGIN_LOCKOUT_FAILURES", 5)
LOGIN_LOCKOUT_BASE_S = env_int("LOGIN_LOCKOUT_BASE_S", 30)
LOGIN_LOCKOUT_MAX_S = env_int("LOGIN_LOCKOUT_MAX_S", 900)
# Optional bearer token for GET /metrics (blank = open, as Prometheus scrapers usually expect on a private net).
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
# Public URL agents use to reach this server (install command, enrolment); blank = derived from the request.
FLEET_PUBLIC_URL = env_str("FLEET_PUBLIC_URL", "")
# Remediation: how long a worker holds a step before another may resume it (beyond the task's hard time limit,
# so a slow executor call is never run twice while it is still in flight).
REMEDIATION_STEP_LEASE_S = env_int("REMEDIATION_STEP_LEASE_S", CELERY_TASK_TIME_LIMIT + 30)
# The worker renews that hold with a heartbeat; without one for this long (a worker killed mid-step), the sweep hands
# the step to another worker (at most REMEDIATION_STEP_LEASE_S).
REMEDIATION_STEP_HEARTBEAT_LEASE_S = env_int("REMEDIATION_STEP_HEARTBEAT_LEASE_S", 15)
# Extra executor modules to import at start-up (each calls fleet.remediation.executors.register()).
REMEDIATION_EXECUTOR_MODULES = env_list("REMEDIATION_EXECUTOR_MODULES", [])
# Wheels served to nodes by /install.sh (built by `manage.py build_agent_wheels`, run by `make setup`).
AGENT_WHEEL_DIR = env_str("AGENT_WHEEL_DIR", str(BASE_DIR / "build" / "agent-wheels"))
# Executors (docs/executors.md). Their secrets are encrypted under FLEET_ENCRYPTION_KEYS like every other secret
# (fleet/core/crypto.py). FLEET_SECRETS_KEY, the executors' own key setting before, is still read as extra
# decryption keys (and as the encryption key where FLEET_ENCRYPTION_KEYS is empty) until reencrypt_secrets ran.
FLEET_SECRETS_KEY = env_str("FLEET_SECRETS_KEY", "")
SSH_CONNECT_TIMEOUT_S = env_int("SSH_CONNECT_TIMEOUT_S", 15)
# An ssh-agent socket for hosts registered without a stored key ("use the agent").
SSH_AUTH_SOCK = env_str("FLEET_SSH_AUTH_SOCK", "")
SSH_BOOTSTRAP_CONCURRENCY = env_int("SSH_BOOTSTRAP_CONCURRENCY", 10)
SSH_BOOTSTRAP_HOST_TIMEOUT_S = env_int("SSH_BOOTSTRAP_HOST_TIMEOUT_S", 600)
# Where operator-installed hooks live on SSH hosts (the agent uses the same directory on its node).
SSH_HOOKS_DIR = env_str("SSH_HOOKS_DIR", "/etc/fleet-agent/hooks")

# --- Overload protection (fleet/core/overload.py, docs/telemetry.md) ------------------------------------
# A request that waited longer than this for a web worker is answered 503 + Retry-After without being processed:
# half the agent's 10-s timeout, the other half left for the work. 0 turns shedding off.
WEB_QUEUE_MAX_S = env_int("WEB_QUEUE_MAX_MS", 5000) / 1000
# Once the queue has not been empty for a second (overload rather than a burst), the bound drops to this.
WEB_QUEUE_TARGET_S = env_int("WEB_QUEUE_TARGET_MS", 500) / 1000
WEB_SHED_RETRY_AFTER_S = env_int("WEB_SHED_RETRY_AFTER_S", 15)
# A request-start header set by a trusted front proxy (e.g. X-Request-Start); blank: only the kernel's measure.
# Never name one that clients can set themselves past the proxy.
WEB_REQUEST_START_HEADER = env_str("WEB_REQUEST_START_HEADER", "")

if REDIS_URL:
    # The cache holds only flood-protection counters, which fail open: a hung Redis must cost a request a bounded
    # wait (redis-py waits forever by default), not hold a web worker past the agent's timeout.
    _CACHE_TIMEOUT_S = env_int("REDIS_CACHE_TIMEOUT_MS", 250) / 1000
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL,
                          "OPTIONS": {"socket_connect_timeout": _CACHE_TIMEOUT_S, "socket_timeout": _CACHE_TIMEOUT_S}}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                          "LOCATION": str(VAR_DIR / "cache")}}

# --- Ingest queue (docs/telemetry.md, "Queued ingest") -------------------------------------------------------
# With Redis, steady-state report batches (no events, no inventory) are acknowledged once appended to a Redis
# stream and written in batches by `manage.py fleet_writer`; everything else, and everything while Redis is down,
# is written in the request. Needs a writer running (compose: `writer`; runstack starts one).
INGEST_QUEUE = env_bool("INGEST_QUEUE", bool(REDIS_URL))
INGEST_QUEUE_URL = env_str("INGEST_QUEUE_URL", REDIS_URL)
INGEST_STREAM = env_str("INGEST_STREAM", "fleet:ingest")
# The fast lane for a queued steady-state report (services/admission.py): credential, rate limit and XADD in two
# round trips and one fsync when the cache and the queue share one Redis. Off: the general path (three, two fsyncs).
INGEST_FAST_LANE = env_bool("INGEST_FAST_LANE", True)
# A request waits at most this long for Redis before writing the batch itself.
INGEST_QUEUE_TIMEOUT_S = env_int("INGEST_QUEUE_TIMEOUT_MS", 250) / 1000
# A bound on the stream (Redis memory) when no writer keeps up: past it, batches are written in the request.
INGEST_QUEUE_MAX_ENTRIES = env_int("INGEST_QUEUE_MAX_ENTRIES", 200_000)
# Writer: entries per batch, and how long an entry read by a writer that died stays with it before another takes it.
INGEST_WRITER_BATCH = env_int("INGEST_WRITER_BATCH", 500)
INGEST_WRITER_CLAIM_IDLE_S = env_int("INGEST_WRITER_CLAIM_IDLE_S", 15)
# An entry that failed this many deliveries goes to the dead-letter stream `<INGEST_STREAM>:dead`.
INGEST_WRITER_MAX_DELIVERIES = env_int("INGEST_WRITER_MAX_DELIVERIES", 5)
# Agent credentials are looked up in the database at most once per this many seconds per credential (Redis);
# revocation, re-enrolment and node deletion drop the cached entry at once and no racing lookup can put it back.
# Keep it well above the agents' interval: an entry that expires between two reports saves nothing
# (services/credentials.py).
AGENT_CREDENTIAL_CACHE_S = env_int("AGENT_CREDENTIAL_CACHE_S", 300)

# --- Integrations (docs/integrations.md) ----------------------------------------------------------
# Fernet keys for every secret at rest (integration credentials, SSH keys, executor credentials; fleet/core/crypto),
# newest first; local and test settings generate one under FLEET_VAR_DIR.
FLEET_ENCRYPTION_KEYS = env_list("FLEET_ENCRYPTION_KEYS", [])
INTEGRATIONS_MAX_ATTEMPTS = env_int("INTEGRATIONS_MAX_ATTEMPTS", 20)
INTEGRATIONS_BACKOFF_BASE_S = env_int("INTEGRATIONS_BACKOFF_BASE_S", 10)
INTEGRATIONS_BACKOFF_MAX_S = env_int("INTEGRATIONS_BACKOFF_MAX_S", 3600)
INTEGRATIONS_HTTP_TIMEOUT_S = env_int("INTEGRATIONS_HTTP_TIMEOUT_S", 15)
# A message claimed by a worker that died is sent again (same dedup key) once its lease has run out.
INTEGRATIONS_LEASE_S = env_int("INTEGRATIONS_LEASE_S", 120)
# Prefix of our ticket keys, so two installations sending to one PagerDuty service never share a dedup_key.
INTEGRATIONS_KEY_PREFIX = env_str("INTEGRATIONS_KEY_PREFIX", "fleet")
# Inbound webhooks signed with a timestamp older (or newer) than this are refused as replays.
INTEGRATIONS_INBOUND_WINDOW_S = env_int("INTEGRATIONS_INBOUND_WINDOW_S", 300)
# The outbound policy (fleet/core/outbound.py, docs/security.md): connectors and executor webhooks never connect to
# loopback, link-local (metadata), multicast or the control plane's own database/Redis; private ranges and
# loopback only when listed here (CIDRs, comma-separated: e.g. "10.20.0.0/16" for an on-premises Jira).
OUTBOUND_ALLOWED_NETWORKS = env_list("FLEET_OUTBOUND_ALLOWED_NETWORKS", [])
for _network in OUTBOUND_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        raise ImproperlyConfigured(f"FLEET_OUTBOUND_ALLOWED_NETWORKS: {_network!r} is not a network (CIDR)") from None
# Where receivers can open an incident or a finding in the console (links in tickets); blank = FLEET_PUBLIC_URL.
FLEET_CONSOLE_URL = env_str("FLEET_CONSOLE_URL", "")
# Mail for the e-mail connector (Django's mail backends).
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 15)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gpu-fleet@localhost")
