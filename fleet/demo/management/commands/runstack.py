"""Run the whole control plane in one terminal: web, Celery worker, Celery beat, the ingest writer when Redis is
configured (and the demo fleet).

Ctrl-C stops every process. This is the embedded default behind `make run`; production runs each
process on its own (docker-compose.yml).
"""

import os
import shutil
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from fleet.telemetry.services.stream import queue_enabled


class Command(BaseCommand):
    help = "Migrate, create the admin user, and run web + worker + beat together until Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("--bind", default=os.environ.get("FLEET_BIND", "127.0.0.1:8000"))
        parser.add_argument("--no-demo", action="store_true", default=os.environ.get("FLEET_DEMO", "1") == "0",
                            help="Do not start the simulated demo fleet (or set FLEET_DEMO=0).")
        parser.add_argument("--web-workers", type=int, default=2)

    def handle(self, *args, bind: str, no_demo: bool, web_workers: int, **options):
        call_command("migrate", interactive=False, verbosity=0)
        call_command("ensure_admin")
        call_command("collectstatic", interactive=False, verbosity=0)
        python = sys.executable
        # Counters from several gunicorn workers add up through files in this folder (prometheus_client).
        metrics_dir = settings.VAR_DIR / "prometheus"
        shutil.rmtree(metrics_dir, ignore_errors=True)
        metrics_dir.mkdir(parents=True)
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
               "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings.local")}
        commands = {
            "web": [python, "-m", "gunicorn", "config.wsgi", "--bind", bind, "--workers", str(web_workers),
                    "--threads", "4", "--graceful-timeout", "5", "--backlog", "1024"],
            "worker": [python, "-m", "celery", "-A", "config", "worker", "--loglevel", "INFO",
                       "--concurrency", "2", "--without-gossip", "--without-mingle"],
            "beat": [python, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO",
                     "--schedule", settings.CELERY_BEAT_SCHEDULE_FILENAME],
        }
        if queue_enabled():  # with Redis: the writer that stores queued report batches (docs/telemetry.md)
            commands["writer"] = [python, "manage.py", "fleet_writer"]
        if not no_demo and _demo_available():
            commands["demo"] = [python, "manage.py", "demo_fleet", "--server", f"http://{bind}"]
        processes: dict[str, subprocess.Popen] = {}
        for name, command in commands.items():
            processes[name] = subprocess.Popen(command, env=env, cwd=settings.BASE_DIR, start_new_session=True)
        self.stdout.write(self.style.SUCCESS(f"GPU fleet control plane on http://{bind}  (Ctrl-C stops everything)"))
        stopping = False

        def stop(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            while not stopping:
                for name, proc in processes.items():
                    if proc.poll() is not None:
                        self.stderr.write(f"{name} exited with {proc.returncode}; stopping the rest.")
                        stopping = True
                time.sleep(0.5)
        finally:
            for proc in processes.values():
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            for proc in processes.values():
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
        self.stdout.write("Stopped.")


def _demo_available() -> bool:
    from django.core.management import get_commands

    return "demo_fleet" in get_commands()
