"""Generic webhook: CloudEvents 1.0 in structured mode, signed with HMAC-SHA256 over timestamp + body.

What we send (docs/integrations.md has a receiver's verification code):

    POST <url>
    Content-Type: application/cloudevents+json; charset=utf-8
    X-Fleet-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>

    {"specversion": "1.0", "id": <dedup key>, "source": <console URL or urn:gpu-fleet:<prefix>>,
     "type": "io.gpufleet.<event kind>", "subject": <ticket key>, "time": <when the change happened>,
     "datacontenttype": "application/json", "fleetaction": "open|update|acknowledge|resolve|notify",
     "data": {"title", "summary", "body", "severity", "facts", "links", "evidence"}}

Receivers reject a signature whose timestamp is more than `INTEGRATIONS_INBOUND_WINDOW_S` (5 minutes) away from
their clock, and drop a second event with an id they have seen (a retry after a worker died).

Inbound (the receiver tells us about its ticket): the same signature scheme with the integration's inbound secret
(or the integration token), body `{"id": <event id>, "ticket": <our ticket key>, "external_id", "external_url",
"state": "acknowledged|in_progress|resolved", "comment", "author"}` or a CloudEvent whose `subject` is the ticket
key and whose `data` holds those fields.
"""

from __future__ import annotations

import time
from datetime import datetime

from django.conf import settings
from rest_framework import serializers

from ..choices import TicketState
from .base import Connector, Envelope, InboundRejected, InboundUpdate, SendResult, hmac_sha256_hex, signature_matches

SIGNATURE_HEADER = "X-Fleet-Signature"
_INBOUND_STATES = {TicketState.ACKNOWLEDGED, TicketState.IN_PROGRESS, TicketState.RESOLVED, TicketState.OPEN}


class WebhookConfig(serializers.Serializer):
    url = serializers.URLField(max_length=500, help_text="Where to POST the events (https recommended)")
    ca_bundle = serializers.CharField(required=False, allow_blank=True, max_length=100_000,
                                      help_text="PEM CA certificates to trust instead of the system store")
    include_evidence = serializers.BooleanField(required=False, default=True)

    def validate_ca_bundle(self, value: str) -> str:
        return validate_pem_bundle(value)


def validate_pem_bundle(value: str) -> str:
    import ssl

    if not value.strip():
        return ""
    try:
        ssl.create_default_context().load_verify_locations(cadata=value)
    except (ssl.SSLError, ValueError) as exc:
        raise serializers.ValidationError(f"Not a PEM certificate bundle: {exc}") from None
    return value


def sign(secret: str, body: bytes, timestamp: int) -> str:
    return f"t={timestamp},v1={hmac_sha256_hex(secret, str(timestamp).encode() + b'.' + body)}"


def parse_signature(header: str) -> tuple[int | None, list[str]]:
    timestamp, signatures = None, []
    for part in (header or "").split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isdigit():
            timestamp = int(value)
        elif name == "v1":
            signatures.append(value)
    return timestamp, signatures


def verify(secret: str, header: str, body: bytes, *, now: float) -> bool:
    timestamp, signatures = parse_signature(header)
    if timestamp is None or abs(now - timestamp) > settings.INTEGRATIONS_INBOUND_WINDOW_S:
        return False
    expected = hmac_sha256_hex(secret, str(timestamp).encode() + b"." + body)
    return signature_matches(expected, signatures)


def cloudevent(envelope: Envelope, *, include_evidence: bool = True) -> dict:
    from ..content import console_url

    content = envelope.content
    data = {k: content.get(k) for k in ("title", "summary", "body", "severity", "facts", "links")}
    if include_evidence and content.get("evidence"):
        data["evidence"] = content["evidence"]
    event = {
        "specversion": "1.0",
        "id": envelope.dedup_key,
        "source": console_url() or f"urn:gpu-fleet:{settings.INTEGRATIONS_KEY_PREFIX}",
        "type": f"io.gpufleet.{envelope.event_kind}",
        "time": envelope.created_at.isoformat().replace("+00:00", "Z"),
        "datacontenttype": "application/json",
        "fleetaction": envelope.action,
        "data": data,
    }
    if envelope.ticket is not None:
        event["subject"] = envelope.ticket.key
        event["fleetticket"] = envelope.ticket.key
    return event


class WebhookConnector(Connector):
    kind = "webhook"
    secret_fields = {"signing_secret": True, "inbound_secret": False, "client_cert": False, "client_key": False}
    inbound_secret = "inbound_secret"
    config_serializer = WebhookConfig

    def send(self, envelope: Envelope, http) -> SendResult:
        import json

        event = cloudevent(envelope, include_evidence=envelope.config.get("include_evidence", True))
        body = json.dumps(event, ensure_ascii=False, separators=(",", ":"), default=str).encode()
        headers = {"Content-Type": "application/cloudevents+json; charset=utf-8",
                   SIGNATURE_HEADER: sign(envelope.secrets["signing_secret"], body, int(time.time()))}
        response = http.request("POST", envelope.config["url"], body=body, headers=headers)
        answer = response.json() if isinstance(response.json(), dict) else {}
        external_id = str(answer.get("ticket_id") or answer.get("id") or "")[:200]
        url = str(answer.get("url") or "")[:500]
        return SendResult(external_id=external_id, external_url=url if url.startswith(("http://", "https://")) else "")

    def verify_signature(self, *, headers: dict[str, str], body: bytes, secret: str, now: datetime) -> bool:
        return verify(secret, headers.get(SIGNATURE_HEADER.lower(), ""), body, now=now.timestamp())

    def parse_inbound(self, *, headers: dict[str, str], payload: dict) -> list[InboundUpdate]:
        return [generic_update(payload)]


def generic_update(payload: dict) -> InboundUpdate:
    """Our own inbound format (any integration, authenticated by its token; webhooks also by signature)."""
    if not isinstance(payload, dict):
        raise InboundRejected("the body must be a JSON object")
    if payload.get("specversion"):
        data = payload.get("data") if isinstance(payload.get("data"), dict) else {}
        payload = {**data, "id": payload.get("id"), "ticket": payload.get("subject") or data.get("ticket")}
    event_id = str(payload.get("id") or "").strip()
    ticket = str(payload.get("ticket") or "").strip()
    external_id = str(payload.get("external_id") or "").strip()
    state = str(payload.get("state") or "").strip()
    comment = str(payload.get("comment") or "").strip()
    if not event_id:
        raise InboundRejected("id: required (a unique id per update, so a replay is stored once)")
    if not ticket and not external_id:
        raise InboundRejected("ticket: required (our ticket key), or external_id")
    if state and state not in _INBOUND_STATES:
        raise InboundRejected(f"state: must be one of {', '.join(sorted(_INBOUND_STATES))}")
    if not state and not comment:
        raise InboundRejected("state or comment: at least one is required")
    url = str(payload.get("external_url") or "")
    return InboundUpdate(event_id=event_id[:200], ticket_key=ticket[:120], external_id=external_id[:200],
                         state=state, comment=comment[:10_000], author=str(payload.get("author") or "")[:200],
                         external_url=url[:500] if url.startswith(("http://", "https://")) else "")
