"""Configuring integrations: validated settings, credentials encrypted at rest and never shown again, the inbound
endpoint's token (shown once), every write audited."""

from __future__ import annotations

import secrets as pysecrets

from django.db import transaction
from rest_framework import serializers

from fleet.core.crypto import decrypt_json, encrypt_json
from fleet.core.models import AuditEntry
from fleet.core.secrets import hash_secret, new_secret
from fleet.core.services import audit_record

from ..connectors import connector_for
from ..models import DeliveryCounter, Integration

INBOUND_TOKEN_PREFIX = "fit_"
_FIELDS = ["name", "kind", "enabled", "description", "config", "max_attempts", "resolve_hold_s"]


def _public(integration: Integration) -> dict:
    """What the audit log keeps of an integration: everything but the credentials (only their names)."""
    return {name: getattr(integration, name) for name in _FIELDS} | {"secret_names": integration.secret_names}


def secrets_validate(*, kind: str, current: dict, changes: dict | None) -> dict:
    """The credentials after applying `changes` (a value of "" or null removes one), checked for the connector:
    unknown names and missing required ones are errors named `secrets.<name>`."""
    connector = connector_for(kind)
    changes = changes or {}
    if not isinstance(changes, dict):
        raise serializers.ValidationError({"secrets": ["Must be an object of name → value."]})
    errors = {}
    merged = dict(current)
    for name, value in changes.items():
        if name not in connector.secret_fields:
            errors[name] = [f"Unknown credential for {kind}; expected one of: {', '.join(connector.secret_fields)}."]
        elif value in (None, ""):
            merged.pop(name, None)
        elif not isinstance(value, str) or len(value) > 100_000:
            errors[name] = ["Must be a string (at most 100000 characters)."]
        else:
            merged[name] = value
    for name, required in connector.secret_fields.items():
        if required and not merged.get(name) and name not in errors:
            errors[name] = ["Required."]
    if errors:
        raise serializers.ValidationError({"secrets": errors})
    for check in ("credentials_check", "secrets_check"):
        problems = getattr(connector, check, None)
        if problems is not None:
            found = problems(merged)
            if found:
                raise serializers.ValidationError({"secrets": {k.split(".", 1)[1]: v for k, v in found.items()}})
    if merged.get("client_cert"):
        _check_client_cert(merged)
    return merged


def _check_client_cert(values: dict) -> None:
    import ssl

    from ..connectors.http import _tls_context

    try:
        _tls_context("", values["client_cert"], values.get("client_key", ""))
    except (ssl.SSLError, ValueError, OSError) as exc:
        raise serializers.ValidationError(
            {"secrets": {"client_cert": [f"Not a PEM certificate with its private key: {exc}"]}}) from None


def config_validate(*, kind: str, config) -> dict:
    if not isinstance(config, dict):
        raise serializers.ValidationError({"config": ["Must be an object."]})
    try:
        return connector_for(kind).validate_config(config)
    except serializers.ValidationError as exc:
        raise serializers.ValidationError({"config": exc.detail}) from None


def _store_secrets(integration: Integration, values: dict) -> None:
    integration.secrets_encrypted = encrypt_json(values)
    integration.secret_names = sorted(values)


def integration_create(*, data: dict, secrets: dict | None, actor) -> tuple[Integration, str]:
    """Create an integration; returns it with its inbound token (the only time the token is shown)."""
    values = secrets_validate(kind=data["kind"], current={}, changes=secrets)
    token, prefix, digest = new_secret(INBOUND_TOKEN_PREFIX)
    integration = Integration(**{k: v for k, v in data.items() if k in _FIELDS},
                              inbound_id=pysecrets.token_urlsafe(12), inbound_token_hash=digest,
                              inbound_token_prefix=prefix)
    _store_secrets(integration, values)
    with transaction.atomic():
        integration.save()
        DeliveryCounter.objects.create(integration=integration)
        audit_record(actor=actor, action=AuditEntry.Action.CREATE, instance=integration, after=_public(integration))
    return integration, token


def integration_update(*, integration: Integration, data: dict, secrets: dict | None, actor) -> Integration:
    if "kind" in data and data["kind"] != integration.kind:
        raise serializers.ValidationError({"kind": ["The connector kind cannot change; create a new integration."]})
    with transaction.atomic():
        integration = Integration.objects.select_for_update().get(pk=integration.pk)
        before = _public(integration)
        for name, value in data.items():
            if name in _FIELDS:
                setattr(integration, name, value)
        if secrets is not None:
            values = secrets_validate(kind=integration.kind, current=decrypt_json(integration.secrets_encrypted),
                                      changes=secrets)
            _store_secrets(integration, values)
        integration.save()
        audit_record(actor=actor, action=AuditEntry.Action.UPDATE, instance=integration, before=before,
                     after=_public(integration), note="credentials changed" if secrets else "")
    return integration


def integration_delete(*, integration: Integration, actor) -> None:
    with transaction.atomic():
        audit_record(actor=actor, action=AuditEntry.Action.DELETE, instance=integration, before=_public(integration))
        integration.delete()


def inbound_token_rotate(*, integration: Integration, actor) -> str:
    token, prefix, digest = new_secret(INBOUND_TOKEN_PREFIX)
    with transaction.atomic():
        Integration.objects.filter(pk=integration.pk).update(inbound_token_hash=digest, inbound_token_prefix=prefix)
        audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=integration,
                     note="inbound token rotated")
    integration.inbound_token_hash, integration.inbound_token_prefix = digest, prefix
    return token


def inbound_token_matches(integration: Integration, token: str) -> bool:
    import hmac

    return bool(integration.inbound_token_hash) and hmac.compare_digest(hash_secret(token),
                                                                        integration.inbound_token_hash)
