"""Re-encrypt every stored secret under the newest FLEET_SECRETS_KEY (the first one), so an old key can go."""

from __future__ import annotations

from django.db import transaction

from .. import secrets
from ..models import BootstrapRun, ExecutorConfig, SSHKey

# (model, field) of every encrypted column; a new one is added here.
ENCRYPTED_FIELDS = [(SSHKey, "private_key_encrypted"), (BootstrapRun, "token_encrypted"),
                    (ExecutorConfig, "secret_encrypted")]


def secrets_rotate() -> dict[str, int]:
    counts: dict[str, int] = {}
    with transaction.atomic():
        for model, field in ENCRYPTED_FIELDS:
            count = 0
            for pk, token in model.objects.select_for_update().exclude(**{f"{field}__isnull": True}).values_list(
                    "pk", field):
                model.objects.filter(pk=pk).update(**{field: secrets.reencrypt(token)})
                count += 1
            counts[f"{model._meta.label_lower}.{field}"] = count
    return counts
