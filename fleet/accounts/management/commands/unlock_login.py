from django.core.management.base import BaseCommand

from fleet.accounts.services import login_lockout_clear


class Command(BaseCommand):
    help = "Lift the login back-off of a username (after failed logins), e.g. when an attacker keeps it locked."

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, *args, username: str, **options):
        login_lockout_clear(username=username, actor="manage.py unlock_login")
        self.stdout.write(f"Login back-off cleared for {username!r}.")
