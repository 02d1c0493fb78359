from django.core.management.base import BaseCommand

from fleet.core.crypto import reencrypt_all


class Command(BaseCommand):
    help = ("Re-encrypt every stored secret under the first key of FLEET_ENCRYPTION_KEYS (the same as "
            "`manage.py reencrypt_secrets`, kept for existing runbooks).")

    def handle(self, *args, **options):
        counts = reencrypt_all()
        integrations = counts.get("integrations.integration.secrets_encrypted", 0)
        self.stdout.write(f"re-encrypted the credentials of {integrations} integration(s) and "
                          f"{sum(counts.values())} secret(s) in all")
