from django.core.management.base import BaseCommand
from django.db import transaction

from fleet.integrations.crypto import secrets_reencrypt
from fleet.integrations.models import Integration


class Command(BaseCommand):
    help = ("Re-encrypt every integration's credentials under the first key of FLEET_ENCRYPTION_KEYS (after a new "
            "key was put first); afterwards the old key can be removed.")

    def handle(self, *args, **options):
        changed = 0
        with transaction.atomic():
            for integration in Integration.objects.select_for_update().exclude(secrets_encrypted=""):
                integration.secrets_encrypted = secrets_reencrypt(integration.secrets_encrypted)
                integration.save(update_fields=["secrets_encrypted"])
                changed += 1
        self.stdout.write(f"re-encrypted the credentials of {changed} integration(s)")
