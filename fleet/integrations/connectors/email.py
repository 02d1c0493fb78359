"""E-mail through Django's mail backends, for support desks that take tickets by mail: the plain-text ticket
body, with the evidence bundle attached (text and JSON).

Each message has a stable Message-ID made from its dedup key, and later messages of a ticket reply to the first
(In-Reply-To / References) with the ticket key in the subject, so desks thread them. A copy re-sent after a worker
died carries the same Message-ID, which mail systems use to drop duplicates.

The integration uses the server's mail settings (EMAIL_*), or its own SMTP server when `smtp_host` is set.
"""

from __future__ import annotations

import json
import smtplib
import time

from django.conf import settings
from django.core.mail import EmailMessage, get_connection
from django.core.mail.backends.smtp import EmailBackend
from rest_framework import serializers

from fleet.core import outbound

from ..choices import TicketAction
from .base import Connector, DeliveryError, Envelope, SendResult, clip


class EmailConfig(serializers.Serializer):
    to = serializers.ListField(child=serializers.EmailField(), min_length=1, max_length=20)
    cc = serializers.ListField(child=serializers.EmailField(), required=False, default=list, max_length=20)
    from_email = serializers.EmailField(required=False, allow_blank=True, default="")
    subject_prefix = serializers.CharField(required=False, allow_blank=True, max_length=60, default="[GPU fleet]")
    smtp_host = serializers.CharField(required=False, allow_blank=True, max_length=253, default="")
    smtp_port = serializers.IntegerField(required=False, min_value=1, max_value=65535, default=587)
    smtp_security = serializers.ChoiceField(choices=["starttls", "ssl", "none"], required=False, default="starttls")
    smtp_username = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")


def _domain(address: str) -> str:
    return address.rpartition("@")[2] or "gpu-fleet.invalid"


def message_id(dedup_key: str, sender: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-._" else "." for c in dedup_key)
    return f"<{safe}@{_domain(sender)}>"


class GuardedEmailBackend(EmailBackend):
    """Django's SMTP backend connecting through the outbound policy (an admin typed this host)."""

    @property
    def connection_class(self):
        return outbound.GuardedSMTPSSL if self.use_ssl else outbound.GuardedSMTP


class EmailConnector(Connector):
    kind = "email"
    secret_fields = {"smtp_password": False}
    config_serializer = EmailConfig

    def check_destinations(self, config: dict) -> None:
        if config.get("smtp_host"):
            try:
                outbound.validate_host(config["smtp_host"], config.get("smtp_port", 587))
            except outbound.OutboundRefused as exc:
                raise serializers.ValidationError({"smtp_host": [f"Not allowed: {exc}."]}) from None

    def _connection(self, config: dict, secrets: dict):
        if not config.get("smtp_host"):
            # The server's own relay (EMAIL_HOST), set by whoever deploys it: not subject to the outbound policy.
            return get_connection(fail_silently=False)
        security = config.get("smtp_security", "starttls")
        return get_connection("fleet.integrations.connectors.email.GuardedEmailBackend", fail_silently=False,
                              host=config["smtp_host"], port=config.get("smtp_port", 587),
                              username=config.get("smtp_username") or None,
                              password=secrets.get("smtp_password") or None,
                              use_tls=security == "starttls", use_ssl=security == "ssl",
                              timeout=settings.INTEGRATIONS_HTTP_TIMEOUT_S)

    def send(self, envelope: Envelope, http) -> SendResult:
        config, content = envelope.config, envelope.content
        sender = config.get("from_email") or settings.DEFAULT_FROM_EMAIL
        ticket = envelope.ticket
        subject = f"{config.get('subject_prefix', '[GPU fleet]')} {content.get('title') or ''}".strip()
        if ticket is not None:
            subject += f" [{ticket.key}]"
        headers = {"Message-ID": message_id(envelope.dedup_key, sender), "X-Fleet-Dedup-Key": envelope.dedup_key}
        first = (ticket.data.get("email_message_id") if ticket else "") or ""
        if first and envelope.action != TicketAction.OPEN:
            headers.update({"In-Reply-To": first, "References": first})
        body = content.get("body") or content.get("summary") or ""
        mail = EmailMessage(subject=clip(subject.replace("\n", " "), 250), body=body, from_email=sender,
                            to=config["to"], cc=config.get("cc") or [], headers=headers,
                            connection=self._connection(config, envelope.secrets))
        if content.get("evidence_text"):
            name = content.get("attachment_name") or "evidence"
            mail.attach(f"{name}.txt", content["evidence_text"], "text/plain")
            if content.get("evidence"):
                mail.attach(f"{name}.json", json.dumps(content["evidence"], indent=1, default=str),
                            "application/json")
        started = time.monotonic()
        where = f"smtp://{config.get('smtp_host') or settings.EMAIL_HOST}"
        entry = {"method": "SMTP", "url": where, "headers": {"To": ", ".join(config["to"]), "Subject": mail.subject,
                                                             "Message-ID": headers["Message-ID"]},
                 "body": body[:4000], "body_bytes": len(body.encode())}
        try:
            mail.send()
        except outbound.OutboundRefused as exc:
            entry.update(error=f"refused by the outbound policy: {exc}"[:500])
            http.exchanges.append(entry)
            raise DeliveryError(f"{where}: refused by the outbound policy: {exc}"[:500], retryable=False) from None
        except smtplib.SMTPResponseException as exc:
            entry.update(status=exc.smtp_code, error=str(exc.smtp_error)[:500])
            http.exchanges.append(entry)
            raise DeliveryError(f"{where} answered {exc.smtp_code}: {exc.smtp_error!r}"[:500],
                                retryable=400 <= exc.smtp_code < 500, status_code=None) from None
        except smtplib.SMTPRecipientsRefused as exc:
            codes = [code for code, _ in exc.recipients.values()]
            entry.update(error=f"recipients refused: {exc.recipients}"[:500])
            http.exchanges.append(entry)
            raise DeliveryError(f"{where} refused the recipients: {exc.recipients}"[:500],
                                retryable=all(400 <= c < 500 for c in codes)) from None
        except (TimeoutError, ConnectionError) as exc:
            # One wording for refused and timed out: the log must not tell a closed port from a filtered one.
            entry.update(error="could not connect (refused, unreachable or timed out)")
            http.exchanges.append(entry)
            raise DeliveryError(f"{where}: could not connect (refused, unreachable or timed out)",
                                retryable=True) from exc
        except (smtplib.SMTPException, OSError) as exc:
            entry.update(error=f"{type(exc).__name__}: {exc}"[:500])
            http.exchanges.append(entry)
            raise DeliveryError(f"{where}: {type(exc).__name__}: {exc}"[:500], retryable=True) from None
        entry.update(status=250, duration_ms=round((time.monotonic() - started) * 1000, 1))
        http.exchanges.append(entry)
        data = {"email_message_id": headers["Message-ID"]} if envelope.action == TicketAction.OPEN else {}
        return SendResult(ticket_data=data)
