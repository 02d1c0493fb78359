"""Slack incoming webhook: a short human notification (summary + a link to the console) per message.

Slack's incoming webhooks have no idempotency key: a message re-sent after a worker died between sending and
recording can appear twice in the channel (at-least-once, the one connector where that is so). Slack answers
`ok` (200), or 400 invalid_payload / 403 action_prohibited / 404 channel_not_found / 410 channel_is_archived
(all dead-lettered at once), 429 with Retry-After, 5xx.
"""

from __future__ import annotations

from rest_framework import serializers

from ..choices import TicketAction
from .base import Connector, Envelope, SendResult, clip

_ICON = {"critical": ":red_circle:", "warning": ":large_orange_circle:", "info": ":large_blue_circle:"}
_VERB = {TicketAction.OPEN: "", TicketAction.UPDATE: "Update: ", TicketAction.ACKNOWLEDGE: "Acknowledged: ",
         TicketAction.RESOLVE: "", TicketAction.NOTIFY: ""}


class SlackConfig(serializers.Serializer):
    channel_label = serializers.CharField(required=False, allow_blank=True, max_length=80, default="",
                                          help_text="Shown in the console only; the webhook URL decides the channel")


class SlackConnector(Connector):
    kind = "slack"
    keeps_tickets = False
    secret_fields = {"webhook_url": True}
    config_serializer = SlackConfig

    @staticmethod
    def secrets_check(secrets: dict) -> dict:
        url = secrets.get("webhook_url", "")
        if url and not url.startswith("https://"):
            return {"secrets.webhook_url": ["Must be an https:// incoming-webhook URL."]}
        return {}

    def send(self, envelope: Envelope, http) -> SendResult:
        content = envelope.content
        icon = ":white_check_mark:" if envelope.action == TicketAction.RESOLVE else \
            _ICON.get(content.get("severity"), ":large_blue_circle:")
        title = f"{icon} {_VERB.get(envelope.action, '')}{content.get('title') or ''}"
        text = content.get("summary") or ""
        if envelope.action == TicketAction.UPDATE and content.get("summary"):
            text = content["summary"]
        links = content.get("links") or {}
        link = next(iter(links.values()), "")
        blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": clip(f"*{title}*\n{text}", 3000)}}]
        if link:
            blocks.append({"type": "context",
                           "elements": [{"type": "mrkdwn", "text": f"<{link}|Open in the console>"}]})
        if envelope.ticket is not None:
            blocks.append({"type": "context",
                           "elements": [{"type": "mrkdwn", "text": f"`{envelope.ticket.key}`"}]})
        http.request("POST", envelope.secrets["webhook_url"], json={"text": clip(f"{title} — {text}", 3000),
                                                                    "blocks": blocks})
        return SendResult()
