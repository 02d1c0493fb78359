from django.core.management.base import BaseCommand

from fleet.core.crypto import reencrypt_all


class Command(BaseCommand):
    help = ("Re-encrypt every stored secret (integration credentials, SSH keys, bootstrap tokens, executor "
            "credentials) under the first key of FLEET_ENCRYPTION_KEYS, after a new key was put first; afterwards "
            "the old key can be removed.")

    def handle(self, *args, **options):
        counts = reencrypt_all()
        for name, count in counts.items():
            self.stdout.write(f"{name}: {count}")
        self.stdout.write(f"re-encrypted {sum(counts.values())} secret(s) under the newest key")
