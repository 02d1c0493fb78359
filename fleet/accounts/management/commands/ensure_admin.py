import os
import secrets

from django.conf import settings
from django.core.management.base import BaseCommand

from fleet.accounts.choices import Role
from fleet.accounts.models import User


class Command(BaseCommand):
    help = "Create the local admin user once and print its credentials (also kept in var/initial-admin.txt, 0600)."

    def add_arguments(self, parser):
        parser.add_argument("--username", default=os.environ.get("FLEET_ADMIN_USER", "admin"))

    def handle(self, *args, username: str, **options):
        path = settings.VAR_DIR / "initial-admin.txt"
        if User.objects.filter(username=username).exists():
            hint = f" (initial credentials in {path})" if path.exists() else ""
            self.stdout.write(f"Admin user '{username}' already exists{hint}.")
            return
        password = os.environ.get("FLEET_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password, role=Role.ADMIN)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(f"username: {username}\npassword: {password}\n")
        self.stdout.write(self.style.SUCCESS(
            f"\n  Created admin user.  username: {username}   password: {password}\n"
            f"  (kept in {path}; change it with `manage.py changepassword {username}`)\n"))
