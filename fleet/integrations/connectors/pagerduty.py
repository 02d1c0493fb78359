"""PagerDuty Events API v2: trigger, acknowledge and resolve an alert by `dedup_key` (our ticket key, one per
incident occurrence). PagerDuty folds a repeated trigger with the same dedup_key into the open alert, so a copy
sent after a worker died is absorbed.

Updates (a workflow step changed) are not sent: the Events API has no comments, and a trigger for an alert that
a responder already resolved would open a new incident. They appear in the delivery log as delivered with a note.

Inbound: a V3 webhook subscription (`X-PagerDuty-Signature: v1=<hex HMAC-SHA256(secret, body)>`) with
`incident.acknowledged`, `incident.resolved`, `incident.annotated` (notes), `incident.reopened`.
"""

from __future__ import annotations

from datetime import datetime

from rest_framework import serializers

from ..choices import TicketAction, TicketState
from .base import (
    Connector,
    Envelope,
    InboundRejected,
    InboundUpdate,
    SendResult,
    clip,
    hmac_sha256_hex,
    signature_matches,
)

EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
_SEVERITY = {"critical": "critical", "warning": "warning", "info": "info"}
_INBOUND = {"incident.acknowledged": TicketState.ACKNOWLEDGED, "incident.resolved": TicketState.RESOLVED,
            "incident.reopened": TicketState.OPEN, "incident.unacknowledged": TicketState.OPEN,
            "incident.triggered": TicketState.OPEN}


class PagerDutyConfig(serializers.Serializer):
    events_url = serializers.URLField(required=False, default=EVENTS_URL, max_length=300,
                                      help_text="https://events.eu.pagerduty.com/v2/enqueue for the EU service region")


class PagerDutyConnector(Connector):
    kind = "pagerduty"
    secret_fields = {"routing_key": True, "inbound_secret": False}
    inbound_secret = "inbound_secret"
    config_serializer = PagerDutyConfig

    def _event(self, envelope: Envelope, action: str) -> dict:
        key = envelope.ticket.key if envelope.ticket else envelope.dedup_key
        event = {"routing_key": envelope.secrets["routing_key"], "event_action": action, "dedup_key": key}
        if action == "trigger":
            content, facts = envelope.content, envelope.content.get("facts") or {}
            event["payload"] = {
                "summary": clip(content.get("title") or content.get("summary") or "GPU fleet alert", 1024),
                "source": facts.get("hostname") or "gpu-fleet",
                "severity": _SEVERITY.get(content.get("severity"), "error"),
                "timestamp": envelope.created_at.isoformat(),
                "component": clip(facts.get("rule") or facts.get("cause") or "", 255) or None,
                "group": facts.get("pool") or None,
                "class": facts.get("layer") or None,
                "custom_details": {"summary": content.get("summary"), "ticket": content.get("body"),
                                   **{k: v for k, v in facts.items() if v not in (None, "", [])}},
            }
            event["payload"] = {k: v for k, v in event["payload"].items() if v is not None}
            links = [{"href": href, "text": name} for name, href in (content.get("links") or {}).items() if href]
            if links:
                event["links"] = links
            event["client"] = "GPU fleet"
        return event

    def send(self, envelope: Envelope, http) -> SendResult:
        url = envelope.config.get("events_url") or EVENTS_URL
        if envelope.event_kind == "test":
            for action in ("trigger", "resolve"):
                http.request("POST", url, json=self._event(envelope, action))
            return SendResult(note="test alert triggered and resolved")
        action = {TicketAction.OPEN: "trigger", TicketAction.NOTIFY: "trigger",
                  TicketAction.ACKNOWLEDGE: "acknowledge", TicketAction.RESOLVE: "resolve"}.get(envelope.action)
        if action is None:
            return SendResult(note="not sent: the Events API has no comments")
        http.request("POST", url, json=self._event(envelope, action))
        # The answer carries only the dedup_key; PagerDuty's incident id and link arrive with the first webhook.
        return SendResult()

    def verify_signature(self, *, headers: dict[str, str], body: bytes, secret: str, now: datetime) -> bool:
        header = headers.get("x-pagerduty-signature", "")
        candidates = [part.strip()[3:] for part in header.split(",") if part.strip().startswith("v1=")]
        return signature_matches(hmac_sha256_hex(secret, body), candidates)

    def parse_inbound(self, *, headers: dict[str, str], payload: dict) -> list[InboundUpdate]:
        event = payload.get("event") if isinstance(payload, dict) else None
        if not isinstance(event, dict) or not event.get("id") or not event.get("event_type"):
            raise InboundRejected("event: a PagerDuty V3 webhook body has an event with id and event_type")
        data = event.get("data") if isinstance(event.get("data"), dict) else {}
        kind = event["event_type"]
        agent = event.get("agent") if isinstance(event.get("agent"), dict) else {}
        author = str(agent.get("summary") or "")[:200]
        occurred = _parse_time(event.get("occurred_at"))
        if kind == "incident.annotated":
            incident = data.get("incident") if isinstance(data.get("incident"), dict) else {}
            return [InboundUpdate(event_id=str(event["id"]), external_id=str(incident.get("id") or ""),
                                  comment=str(data.get("content") or "")[:10_000], author=author, at=occurred)]
        state = _INBOUND.get(kind)
        if state is None:
            return []  # an event type we do not map (priority changed, …): acknowledged, nothing stored
        url = str(data.get("html_url") or "")
        return [InboundUpdate(event_id=str(event["id"]), ticket_key=str(data.get("incident_key") or ""),
                              external_id=str(data.get("id") or ""), state=state, author=author, at=occurred,
                              external_url=url if url.startswith("https://") else "",
                              comment=f"PagerDuty: {kind.split('.', 1)[1]}" + (f" by {author}" if author else ""))]


def _parse_time(value) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None
    except ValueError:
        return None
