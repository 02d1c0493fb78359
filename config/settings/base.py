"""Settings shared by every environment. Every value comes from the environment with a safe default;
`.env.example` lists them all."""

from pathlib import Path

import dj_database_url

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
    "fleet.health",
    "fleet.billing",
    "fleet.executors",
    "fleet.console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
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
    return config


DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'fleet.sqlite3'}")
DATABASES = {"default": _database(DATABASE_URL)}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
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
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.SearchFilter",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "fleet.core.api.pagination.FleetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "fleet.core.api.errors.exception_handler",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "DEFAULT_THROTTLE_RATES": {"agent": env_str("AGENT_RATE_LIMIT", "120/min"),
                               "enroll": env_str("ENROLL_RATE_LIMIT", "600/min")},
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
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_EXPIRES = 3600
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Every periodic task, in one place. Each is a thin wrapper around a service of the same name.
CELERY_BEAT_SCHEDULE: dict = {
    "health-evaluate-fleet": {"task": "health.evaluate_fleet", "schedule": env_int("HEALTH_EVAL_INTERVAL_S", 15)},
    "telemetry-mark-silent-nodes": {"task": "telemetry.mark_silent_nodes", "schedule": 15},
    "telemetry-rollup-history": {"task": "telemetry.rollup_history", "schedule": 300},
    "telemetry-prune-history": {"task": "telemetry.prune_history", "schedule": 3600},
    "billing-evaluate-terms": {"task": "billing.check_reserved_terms", "schedule": 3600},
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
TELEMETRY_ROLLUP_RETENTION_DAYS = env_int("TELEMETRY_ROLLUP_RETENTION_DAYS", 30)
TELEMETRY_EVENT_RETENTION_DAYS = env_int("TELEMETRY_EVENT_RETENTION_DAYS", 365)
AGENT_MAX_BODY_BYTES = env_int("AGENT_MAX_BODY_BYTES", 4 * 1024 * 1024)
# Optional bearer token for GET /metrics (blank = open, as Prometheus scrapers usually expect on a private net).
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
# Public URL agents use to reach this server (install command, enrolment); blank = derived from the request.
FLEET_PUBLIC_URL = env_str("FLEET_PUBLIC_URL", "")
# Wheels served to nodes by /install.sh (built by `manage.py build_agent_wheels`, run by `make setup`).
AGENT_WHEEL_DIR = env_str("AGENT_WHEEL_DIR", str(BASE_DIR / "build" / "agent-wheels"))
# Executors (docs/executors.md). Fernet key(s) that encrypt stored SSH keys and executor credentials; the
# embedded default generates one under var/, production must set it before storing any.
FLEET_SECRETS_KEY = env_str("FLEET_SECRETS_KEY", "")
SSH_CONNECT_TIMEOUT_S = env_int("SSH_CONNECT_TIMEOUT_S", 15)
# An ssh-agent socket for hosts registered without a stored key ("use the agent").
SSH_AUTH_SOCK = env_str("FLEET_SSH_AUTH_SOCK", "")
SSH_BOOTSTRAP_CONCURRENCY = env_int("SSH_BOOTSTRAP_CONCURRENCY", 10)
SSH_BOOTSTRAP_HOST_TIMEOUT_S = env_int("SSH_BOOTSTRAP_HOST_TIMEOUT_S", 600)
# Where operator-installed hooks live on SSH hosts (the agent uses the same directory on its node).
SSH_HOOKS_DIR = env_str("SSH_HOOKS_DIR", "/etc/fleet-agent/hooks")

if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                          "LOCATION": str(VAR_DIR / "cache")}}
