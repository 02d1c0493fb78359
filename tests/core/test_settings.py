import os
import secrets
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.db import connection

from config.celery_app import app

ROOT = Path(__file__).resolve().parents[2]


def test_celery_time_limits_really_took_effect():
    # A misspelt CELERY_* key is silently ignored; read the values back from the Celery app itself.
    assert app.conf.task_time_limit == settings.CELERY_TASK_TIME_LIMIT == 300
    assert app.conf.task_soft_time_limit == settings.CELERY_TASK_SOFT_TIME_LIMIT == 240
    assert app.conf.task_acks_late is True
    assert app.conf.task_reject_on_worker_lost is True
    assert app.conf.worker_prefetch_multiplier == 1


def test_broker_follows_environment():
    if os.environ.get("REDIS_URL"):
        assert app.conf.broker_url.startswith("redis://")
    else:
        assert app.conf.broker_url.startswith("filesystem://")
        assert Path(app.conf.broker_transport_options["data_folder_in"]).is_dir()


def test_sqlite_runs_in_wal_mode(db):
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == "wal"


def _run_manage(args, env):
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def _prod_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DJANGO_SETTINGS_MODULE")}
    env.update({"DJANGO_SETTINGS_MODULE": "config.settings.production", "ALLOWED_HOSTS": "fleet.example.com"})
    env.update(extra)
    return env


def test_production_refuses_to_start_without_secret_key():
    result = _run_manage(["check"], _prod_env())
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_production_passes_check_deploy_without_warnings():
    env = _prod_env(SECRET_KEY=secrets.token_urlsafe(50))
    result = _run_manage(["check", "--deploy", "--fail-level", "WARNING"], env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_keeps_api_docs_private_by_default():
    env = _prod_env(SECRET_KEY=secrets.token_urlsafe(50))
    result = _run_manage(["shell", "-c", "from django.conf import settings; print(settings.API_DOCS_PUBLIC)"], env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_env_example_documents_every_variable():
    text = (ROOT / ".env.example").read_text()
    for name in ["DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "SECRET_KEY",
                 "ALLOWED_HOSTS", "DEBUG", "CELERY_TASK_TIME_LIMIT", "CELERY_TASK_SOFT_TIME_LIMIT",
                 "FLEET_VAR_DIR", "CSRF_TRUSTED_ORIGINS", "LOG_LEVEL", "API_DOCS_PUBLIC", "API_JSON_MAX_DEPTH",
                 "API_TOKEN_DEFAULT_TTL_DAYS", "API_TOKEN_MAX_TTL_DAYS", "LOGIN_RATE_LIMIT", "LOGIN_LOCKOUT_FAILURES",
                 "LOGIN_LOCKOUT_BASE_S", "LOGIN_LOCKOUT_MAX_S", "NUM_PROXIES"]:
        assert f"{name}=" in text, name
