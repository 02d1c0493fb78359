"""ServiceNow Table API: an `incident` per ticket with `correlation_id` = our ticket key, work notes for what
happens next, and resolution on close; or (mode `em_event`) Event Management events with `message_key` = our
ticket key, closed with severity 0 (Clear).

Before creating on a retry, the connector looks the incident up by correlation_id, so an incident created by a
try that died before recording it is found and not created twice.

Inbound: a business rule (or Flow) on the incident table POSTs to our inbound URL with the integration token
(`Authorization: Bearer <token>`): `{"sys_id", "number", "correlation_id", "state", "work_notes", "comments",
"sys_updated_on", "sys_updated_by"}`. States 2 (In Progress) and 6/7 (Resolved/Closed) are mapped.
"""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

from rest_framework import serializers

from ..choices import TicketAction, TicketState
from .base import Connector, Envelope, InboundRejected, InboundUpdate, SendResult, clip

_URGENCY = {"critical": "1", "warning": "2", "info": "3"}
_EM_SEVERITY = {"critical": "1", "warning": "4", "info": "5"}
_INBOUND_STATE = {"2": TicketState.IN_PROGRESS, "3": TicketState.IN_PROGRESS, "6": TicketState.RESOLVED,
                  "7": TicketState.RESOLVED, "8": TicketState.RESOLVED, "1": TicketState.OPEN}


class ServiceNowConfig(serializers.Serializer):
    instance_url = serializers.URLField(max_length=300, help_text="https://<instance>.service-now.com")
    mode = serializers.ChoiceField(choices=["incident", "em_event"], required=False, default="incident")
    assignment_group = serializers.CharField(required=False, allow_blank=True, max_length=100, default="")
    caller_id = serializers.CharField(required=False, allow_blank=True, max_length=100, default="")
    category = serializers.CharField(required=False, allow_blank=True, max_length=100, default="")
    resolve_state = serializers.CharField(required=False, max_length=8, default="6")
    close_code = serializers.CharField(required=False, max_length=100, default="Solution provided")
    ca_bundle = serializers.CharField(required=False, allow_blank=True, max_length=100_000)

    def validate_instance_url(self, value: str) -> str:
        if not value.startswith("https://"):
            raise serializers.ValidationError("ServiceNow instances are reached over https.")
        return value.rstrip("/")

    def validate_ca_bundle(self, value: str) -> str:
        from .webhook import validate_pem_bundle

        return validate_pem_bundle(value)


class ServiceNowConnector(Connector):
    kind = "servicenow"
    secret_fields = {"username": False, "password": False, "oauth_token": False}
    config_serializer = ServiceNowConfig

    @staticmethod
    def credentials_check(secrets: dict) -> dict:
        """Basic auth (username + password) or an OAuth bearer token; which one is missing, by name."""
        if secrets.get("oauth_token"):
            return {}
        missing = [name for name in ("username", "password") if not secrets.get(name)]
        return {f"secrets.{name}": ["Required (or set secrets.oauth_token)."] for name in missing}

    def _headers(self, secrets: dict) -> dict:
        if secrets.get("oauth_token"):
            auth = f"Bearer {secrets['oauth_token']}"
        else:
            auth = "Basic " + base64.b64encode(f"{secrets['username']}:{secrets['password']}".encode()).decode()
        return {"Authorization": auth, "Accept": "application/json"}

    def send(self, envelope: Envelope, http) -> SendResult:
        config, headers = envelope.config, self._headers(envelope.secrets)
        base = config["instance_url"].rstrip("/")
        if envelope.event_kind == "test":
            http.request("GET", f"{base}/api/now/table/incident?sysparm_limit=1&sysparm_fields=sys_id",
                         headers=headers)
            return SendResult(note="credentials and table access checked (nothing created)")
        if config.get("mode") == "em_event":
            return self._em_event(envelope, http, base, headers)
        content, key = envelope.content, envelope.ticket.key if envelope.ticket else envelope.dedup_key
        if envelope.action in (TicketAction.OPEN, TicketAction.NOTIFY):
            found = self._find(http, base, headers, key) if envelope.retrying else None
            if found:
                return self._result(base, found, note="found the incident an interrupted try had created")
            record = {"short_description": clip(content.get("title") or "", 160),
                      "description": content.get("body") or "", "correlation_id": key,
                      "correlation_display": "GPU fleet", "urgency": _URGENCY.get(content.get("severity"), "2"),
                      "impact": _URGENCY.get(content.get("severity"), "2"),
                      **{name: config[name] for name in ("assignment_group", "caller_id", "category")
                         if config.get(name)}}
            response = http.request("POST", f"{base}/api/now/table/incident?sysparm_fields=sys_id,number",
                                    json=record, headers=headers)
            return self._result(base, (response.json() or {}).get("result") or {})
        sys_id = envelope.ticket.external_id if envelope.ticket else ""
        if not sys_id:
            found = self._find(http, base, headers, key)
            sys_id = (found or {}).get("sys_id", "")
        if not sys_id:
            from .base import DeliveryError

            raise DeliveryError(f"no ServiceNow incident with correlation_id {key}", retryable=False)
        if envelope.action == TicketAction.RESOLVE:
            change = {"state": config.get("resolve_state") or "6",
                      "close_code": config.get("close_code") or "Solution provided",
                      "close_notes": clip(content.get("body") or content.get("summary") or "", 4000)}
        else:
            change = {"work_notes": clip(content.get("summary") or "", 4000)}
        http.request("PATCH", f"{base}/api/now/table/incident/{quote(sys_id, safe='')}", json=change,
                     headers=headers)
        return SendResult()

    def _find(self, http, base: str, headers: dict, key: str) -> dict | None:
        query = quote(f"correlation_id={key}", safe="=")
        response = http.request("GET", f"{base}/api/now/table/incident?sysparm_query={query}"
                                       f"&sysparm_fields=sys_id,number&sysparm_limit=1", headers=headers)
        rows = (response.json() or {}).get("result") or []
        return rows[0] if rows else None

    def _result(self, base: str, record: dict, note: str = "") -> SendResult:
        sys_id = str(record.get("sys_id") or "")
        url = f"{base}/nav_to.do?uri=incident.do?sys_id={sys_id}" if sys_id else ""
        return SendResult(external_id=sys_id, external_url=url, note=note,
                          ticket_data={"number": record.get("number")} if record.get("number") else {})

    def _em_event(self, envelope: Envelope, http, base: str, headers: dict) -> SendResult:
        content, facts = envelope.content, envelope.content.get("facts") or {}
        key = envelope.ticket.key if envelope.ticket else envelope.dedup_key
        severity = "0" if envelope.action == TicketAction.RESOLVE else _EM_SEVERITY.get(content.get("severity"), "3")
        event = {"source": "GPU fleet", "node": facts.get("hostname") or "", "type": facts.get("rule") or "gpu",
                 "resource": ",".join(g.get("uuid", "") for g in facts.get("gpus") or []),
                 "severity": severity, "message_key": key,
                 "description": clip(content.get("body") or content.get("summary") or "", 4000),
                 "additional_info": json.dumps({k: v for k, v in facts.items() if v not in (None, "", [])},
                                               default=str)}
        http.request("POST", f"{base}/api/now/table/em_event", json=event, headers=headers)
        return SendResult(external_id=key if envelope.action == TicketAction.OPEN else "")

    def parse_inbound(self, *, headers: dict[str, str], payload: dict) -> list[InboundUpdate]:
        if not isinstance(payload, dict) or not (payload.get("sys_id") or payload.get("correlation_id")):
            raise InboundRejected("sys_id or correlation_id: required")
        sys_id, key = str(payload.get("sys_id") or ""), str(payload.get("correlation_id") or "")
        stamp = str(payload.get("sys_updated_on") or "")
        if not stamp:
            raise InboundRejected("sys_updated_on: required (it makes a replay recognisable)")
        state = _INBOUND_STATE.get(str(payload.get("state") or ""), "")
        notes = [str(payload.get(name) or "").strip() for name in ("work_notes", "comments", "close_notes")]
        comment = "\n".join(n for n in notes if n)
        if not state and not comment:
            return []
        return [InboundUpdate(event_id=f"{sys_id or key}:{stamp}", ticket_key=key, external_id=sys_id, state=state,
                              comment=comment[:10_000], author=str(payload.get("sys_updated_by") or "")[:200])]
