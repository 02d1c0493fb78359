import logging
import signal
import threading
import time
import urllib.request

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from fleet.accounts.models import User
from fleet.demo.seed import demo_run, demo_seed


class Command(BaseCommand):
    help = "Seed the demo fleet and run its simulated agents against a running server until Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("--server", default="http://127.0.0.1:8000")
        parser.add_argument("--scenario", default="demo-fleet", help="bundled scenario name or JSON file")
        parser.add_argument("--interval", type=float, default=5.0, help="seconds between reports (demo: 5)")
        parser.add_argument("--wait", type=float, default=60.0, help="seconds to wait for the server")

    def handle(self, *args, server: str, scenario: str, interval: float, wait: float, **options):
        from fleet_agent.simulator import load_scenario

        logging.getLogger("fleet_agent").setLevel(logging.WARNING)
        loaded = load_scenario(scenario)
        actor = User.objects.filter(is_superuser=True).order_by("pk").first()
        if actor is None:
            raise CommandError("no admin user yet: run `manage.py ensure_admin` first")
        groups = demo_seed(scenario=loaded, actor=actor)
        self._wait_for(server, wait)
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        self.stdout.write(f"demo fleet: {len(loaded.nodes)} simulated nodes in {len(groups)} pools → {server}")
        demo_run(groups=groups, server=server, state_dir=settings.VAR_DIR / "demo", interval_s=interval, stop=stop)

    def _wait_for(self, server: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            try:
                with urllib.request.urlopen(f"{server}/healthz", timeout=2):  # noqa: S310 (operator-given URL)
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise CommandError(f"server {server} did not answer /healthz within {seconds:.0f} s") from None
                time.sleep(0.5)
