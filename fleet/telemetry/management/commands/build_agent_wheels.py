import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = ("Build the agent wheel from agents/ into AGENT_WHEEL_DIR, which /install.sh serves. "
            "--with-deps also downloads nvidia-ml-py there for nodes without internet access.")

    def add_arguments(self, parser):
        parser.add_argument("--with-deps", action="store_true")

    def handle(self, *args, with_deps: bool, **options):
        target = Path(settings.AGENT_WHEEL_DIR)
        target.mkdir(parents=True, exist_ok=True)
        for old in target.glob("fleet_agent-*.whl"):
            old.unlink()
        source = settings.BASE_DIR / "agents"
        self._pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(target), str(source))
        if with_deps:
            self._pip("download", "--only-binary=:all:", "-d", str(target), "nvidia-ml-py>=12,<14")
        self.stdout.write(f"agent wheels in {target}: {', '.join(sorted(p.name for p in target.glob('*.whl')))}")

    def _pip(self, *args: str) -> None:
        result = subprocess.run([sys.executable, "-m", "pip", "-q", *args], capture_output=True, text=True)
        if result.returncode != 0:
            raise CommandError(f"pip {args[0]} failed:\n{result.stderr[-2000:]}")
