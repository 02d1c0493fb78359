"""Opsgenie Alert API v2: create, acknowledge, add a note and close an alert by `alias` (our ticket key).

Opsgenie folds a create with the alias of an open alert into that alert (its count goes up), so a copy sent after
a worker died is absorbed. Requests are accepted asynchronously (202 with a requestId).

Inbound: an Opsgenie Webhook integration pointed at our inbound URL with the integration token in a custom header
(`Authorization: Bearer <token>`); actions Acknowledge, AddNote, Close, UnAcknowledge.
"""

from __future__ import annotations

from urllib.parse import quote

from rest_framework import serializers

from ..choices import TicketAction, TicketState
from .base import Connector, Envelope, InboundRejected, InboundUpdate, SendResult, clip

API_URL = "https://api.opsgenie.com"
_PRIORITY = {"critical": "P1", "warning": "P3", "info": "P5"}
_INBOUND = {"Acknowledge": TicketState.ACKNOWLEDGED, "Close": TicketState.RESOLVED,
            "UnAcknowledge": TicketState.OPEN, "Create": TicketState.OPEN}


class OpsgenieConfig(serializers.Serializer):
    api_url = serializers.URLField(required=False, default=API_URL, max_length=300,
                                   help_text="https://api.eu.opsgenie.com for the EU instance")
    responders = serializers.ListField(child=serializers.DictField(), required=False, default=list,
                                       help_text='e.g. [{"type": "team", "name": "gpu-oncall"}]')
    tags = serializers.ListField(child=serializers.CharField(max_length=50), required=False, default=list)


class OpsgenieConnector(Connector):
    kind = "opsgenie"
    secret_fields = {"api_key": True}
    config_serializer = OpsgenieConfig

    def send(self, envelope: Envelope, http) -> SendResult:
        base = (envelope.config.get("api_url") or API_URL).rstrip("/")
        headers = {"Authorization": f"GenieKey {envelope.secrets['api_key']}"}
        alias = envelope.ticket.key if envelope.ticket else envelope.dedup_key
        content, facts = envelope.content, envelope.content.get("facts") or {}
        target = f"{base}/v2/alerts/{quote(alias, safe='')}"
        note = {"source": "GPU fleet", "user": "gpu-fleet", "note": clip(content.get("summary") or "", 25000)}
        if envelope.action in (TicketAction.OPEN, TicketAction.NOTIFY) or envelope.event_kind == "test":
            alert = {
                "message": clip(content.get("title") or "GPU fleet alert", 130),
                "alias": clip(alias, 512),
                "description": clip(content.get("body") or "", 15000),
                "priority": _PRIORITY.get(content.get("severity"), "P3"),
                "source": "GPU fleet",
                "entity": clip(facts.get("hostname") or "", 512) or None,
                "tags": [*envelope.config.get("tags", []), f"severity:{content.get('severity', '')}"],
                "details": {k: clip(str(v), 8000) for k, v in facts.items() if v not in (None, "", [])},
                "responders": envelope.config.get("responders") or None,
            }
            http.request("POST", f"{base}/v2/alerts", json={k: v for k, v in alert.items() if v is not None},
                         headers=headers)
            if envelope.event_kind == "test":
                http.request("POST", f"{target}/close?identifierType=alias", json=note, headers=headers)
                return SendResult(note="test alert created and closed")
            return SendResult(external_id=alias)
        path = {TicketAction.UPDATE: "notes", TicketAction.ACKNOWLEDGE: "acknowledge",
                TicketAction.RESOLVE: "close"}[envelope.action]
        http.request("POST", f"{target}/{path}?identifierType=alias", json=note, headers=headers)
        return SendResult()

    def parse_inbound(self, *, headers: dict[str, str], payload: dict) -> list[InboundUpdate]:
        alert = payload.get("alert") if isinstance(payload, dict) else None
        action = payload.get("action") if isinstance(payload, dict) else None
        if not isinstance(alert, dict) or not action:
            raise InboundRejected("alert and action: an Opsgenie webhook body has both")
        alias = str(alert.get("alias") or "")
        author = str(alert.get("username") or payload.get("source", {}).get("name", "") or "")[:200]
        event_id = f"{alert.get('alertId', alias)}:{action}:{alert.get('updatedAt') or alert.get('createdAt') or ''}"
        if action == "AddNote":
            return [InboundUpdate(event_id=event_id, ticket_key=alias, comment=str(alert.get("note") or "")[:10_000],
                                  author=author)]
        state = _INBOUND.get(action)
        if state is None:
            return []
        return [InboundUpdate(event_id=event_id, ticket_key=alias, state=state, author=author,
                              comment=f"Opsgenie: {action}" + (f" by {author}" if author else ""))]
