"""Jira Cloud REST API v3: create an issue in a configured project (labelled with our ticket key), attach the
evidence bundle, comment on each step, transition to a done status on close.

Jira has no idempotency key, so every step that a dead worker may have done already is looked up on a retry
first: the issue by its label (`POST /rest/api/3/search/jql`), the attachment by file name, a comment by the
dedup key it ends with, the transition by the issue's status category. Steps done are checkpointed.

Inbound: a Jira webhook (admin → System → WebHooks) with a secret signs its body in `X-Hub-Signature:
sha256=<hex HMAC-SHA256(secret, body)>`; `jira:issue_updated` moves the ticket by status category
(indeterminate → in progress, done → resolved) and `comment_created` adds the comment.
"""

from __future__ import annotations

import json
from datetime import datetime
from urllib.parse import quote

from rest_framework import serializers
from urllib3 import encode_multipart_formdata

from ..choices import TicketAction, TicketState
from .base import (
    Connector,
    DeliveryError,
    Envelope,
    InboundRejected,
    InboundUpdate,
    SendResult,
    clip,
    hmac_sha256_hex,
    signature_matches,
)

_PRIORITY = {"critical": "Highest", "warning": "High", "info": "Low"}
_CATEGORY_STATE = {"indeterminate": TicketState.IN_PROGRESS, "done": TicketState.RESOLVED, "new": TicketState.OPEN}


class JiraConfig(serializers.Serializer):
    site_url = serializers.URLField(max_length=300, help_text="https://<site>.atlassian.net")
    project_key = serializers.RegexField(r"^[A-Z][A-Z0-9_]{1,9}$", help_text="e.g. OPS")
    issue_type = serializers.CharField(required=False, max_length=60, default="Task")
    close_transition = serializers.CharField(required=False, allow_blank=True, max_length=60, default="",
                                             help_text="Transition name on close; blank = the first to a done status")
    set_priority = serializers.BooleanField(required=False, default=False)

    def validate_site_url(self, value: str) -> str:
        if not value.startswith("https://"):
            raise serializers.ValidationError("Jira Cloud sites are reached over https.")
        return value.rstrip("/")


def adf(text: str) -> dict:
    """Plain text as an Atlassian Document: one paragraph per blank-line-separated block, line breaks kept."""
    content = []
    for block in (text or "").strip().split("\n\n"):
        lines = [line for line in block.split("\n")]
        nodes = []
        for index, line in enumerate(lines):
            if index:
                nodes.append({"type": "hardBreak"})
            if line:
                nodes.append({"type": "text", "text": line})
        if nodes:
            content.append({"type": "paragraph", "content": nodes})
    return {"type": "doc", "version": 1, "content": content or [{"type": "paragraph", "content": []}]}


def label_for(key: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in key)[:255]


class JiraConnector(Connector):
    kind = "jira"
    secret_fields = {"email": True, "api_token": True, "inbound_secret": False}
    inbound_secret = "inbound_secret"
    config_serializer = JiraConfig

    def _headers(self, secrets: dict) -> dict:
        import base64

        token = base64.b64encode(f"{secrets['email']}:{secrets['api_token']}".encode()).decode()
        return {"Authorization": f"Basic {token}", "Accept": "application/json"}

    def send(self, envelope: Envelope, http) -> SendResult:
        config, headers = envelope.config, self._headers(envelope.secrets)
        base = config["site_url"].rstrip("/")
        if envelope.event_kind == "test":
            http.request("GET", f"{base}/rest/api/3/project/{quote(config['project_key'])}", headers=headers)
            return SendResult(note="credentials and project checked (nothing created)")
        key = envelope.ticket.key if envelope.ticket else envelope.dedup_key
        issue = (envelope.ticket.external_id if envelope.ticket else "") or \
            (envelope.progress.get("created") or {}).get("issue", "")
        result = SendResult()
        if envelope.action in (TicketAction.OPEN, TicketAction.NOTIFY):
            if not issue:
                issue = self._create(envelope, http, base, headers, key)
            result = SendResult(external_id=issue, external_url=f"{base}/browse/{issue}")
            if envelope.content.get("evidence_text") and "attached" not in envelope.progress:
                self._attach(envelope, http, base, headers, issue)
            return result
        if not issue:
            issue = self._search(http, base, headers, key)
            if not issue:
                raise DeliveryError(f"no Jira issue labelled {label_for(key)}", retryable=False)
        self._comment(envelope, http, base, headers, issue)
        if envelope.action == TicketAction.RESOLVE:
            self._transition(envelope, http, base, headers, issue)
        return result

    def _search(self, http, base: str, headers: dict, key: str) -> str:
        jql = f'labels = "{label_for(key)}" ORDER BY created ASC'
        response = http.request("POST", f"{base}/rest/api/3/search/jql", headers=headers,
                                json={"jql": jql, "fields": ["key"], "maxResults": 1})
        issues = (response.json() or {}).get("issues") or []
        return str(issues[0].get("key") or "") if issues else ""

    def _create(self, envelope: Envelope, http, base: str, headers: dict, key: str) -> str:
        issue = self._search(http, base, headers, key) if envelope.retrying else ""
        if not issue:
            content, config = envelope.content, envelope.config
            fields = {"project": {"key": config["project_key"]},
                      "issuetype": {"name": config.get("issue_type") or "Task"},
                      "summary": clip((content.get("title") or "GPU fleet").replace("\n", " "), 255),
                      "description": adf(clip(content.get("body") or "", 30000)),
                      "labels": ["gpu-fleet", label_for(key)]}
            if config.get("set_priority"):
                fields["priority"] = {"name": _PRIORITY.get(content.get("severity"), "Medium")}
            response = http.request("POST", f"{base}/rest/api/3/issue", json={"fields": fields}, headers=headers)
            issue = str((response.json() or {}).get("key") or "")
            if not issue:
                raise DeliveryError("Jira created an issue but did not say its key", retryable=True)
        envelope.step_done("created", issue=issue)
        return issue

    def _attach(self, envelope: Envelope, http, base: str, headers: dict, issue: str) -> None:
        content = envelope.content
        name = content.get("attachment_name") or "evidence"
        files = {"txt": (f"{name}.txt", content["evidence_text"].encode(), "text/plain")}
        if content.get("evidence"):
            files["json"] = (f"{name}.json", json.dumps(content["evidence"], indent=1, default=str).encode(),
                             "application/json")
        if envelope.retrying:
            response = http.request("GET", f"{base}/rest/api/3/issue/{quote(issue)}?fields=attachment",
                                    headers=headers)
            have = {a.get("filename") for a in ((response.json() or {}).get("fields") or {}).get("attachment") or []}
            files = {k: v for k, v in files.items() if v[0] not in have}
        for part in files.values():
            body, content_type = encode_multipart_formdata({"file": part})
            http.request("POST", f"{base}/rest/api/3/issue/{quote(issue)}/attachments", body=body,
                         headers={**headers, "Content-Type": content_type, "X-Atlassian-Token": "no-check"})
        envelope.step_done("attached")

    def _comment(self, envelope: Envelope, http, base: str, headers: dict, issue: str) -> None:
        if "commented" in envelope.progress:
            return
        marker = f"GPU fleet · {envelope.dedup_key}"
        if envelope.retrying:
            response = http.request("GET", f"{base}/rest/api/3/issue/{quote(issue)}/comment?orderBy=-created"
                                           f"&maxResults=50", headers=headers)
            if marker in json.dumps((response.json() or {}).get("comments") or [], ensure_ascii=False):
                envelope.step_done("commented")
                return
        text = envelope.content.get("body") if envelope.action == TicketAction.RESOLVE else \
            envelope.content.get("summary")
        http.request("POST", f"{base}/rest/api/3/issue/{quote(issue)}/comment", headers=headers,
                     json={"body": adf(f"{clip(text or '', 30000)}\n\n{marker}")})
        envelope.step_done("commented")

    def _transition(self, envelope: Envelope, http, base: str, headers: dict, issue: str) -> None:
        response = http.request("GET", f"{base}/rest/api/3/issue/{quote(issue)}/transitions", headers=headers)
        transitions = (response.json() or {}).get("transitions") or []
        wanted = (envelope.config.get("close_transition") or "").strip().lower()
        chosen = next((t for t in transitions if (t.get("name") or "").lower() == wanted), None) if wanted else \
            next((t for t in transitions
                  if ((t.get("to") or {}).get("statusCategory") or {}).get("key") == "done"), None)
        if chosen is None:
            status = http.request("GET", f"{base}/rest/api/3/issue/{quote(issue)}?fields=status", headers=headers)
            category = (((status.json() or {}).get("fields") or {}).get("status") or {}).get("statusCategory") or {}
            if category.get("key") == "done":
                return  # already closed (by a person, or by a try that died before recording it)
            raise DeliveryError(f"issue {issue} has no transition " + (f"named {wanted!r}" if wanted else
                                                                       "to a done status"), retryable=False)
        http.request("POST", f"{base}/rest/api/3/issue/{quote(issue)}/transitions", headers=headers,
                     json={"transition": {"id": chosen["id"]}})

    def verify_signature(self, *, headers: dict[str, str], body: bytes, secret: str, now: datetime) -> bool:
        header = headers.get("x-hub-signature", "")
        method, _, signature = header.partition("=")
        return method == "sha256" and signature_matches(hmac_sha256_hex(secret, body), [signature])

    def parse_inbound(self, *, headers: dict[str, str], payload: dict) -> list[InboundUpdate]:
        if not isinstance(payload, dict) or not isinstance(payload.get("issue"), dict):
            raise InboundRejected("issue: a Jira webhook body has the issue")
        issue = payload["issue"]
        kind = str(payload.get("webhookEvent") or "")
        event_id = headers.get("x-atlassian-webhook-identifier") or \
            f"{kind}:{issue.get('id')}:{payload.get('timestamp')}"
        labels = (issue.get("fields") or {}).get("labels") or []
        ours = next((label for label in labels if label != "gpu-fleet"), "")
        if kind == "comment_created" and isinstance(payload.get("comment"), dict):
            comment = payload["comment"]
            body = comment.get("body")
            text = body if isinstance(body, str) else _adf_text(body)
            if "GPU fleet · " in text:
                return []  # our own comment coming back
            author = str((comment.get("author") or {}).get("displayName") or "")[:200]
            return [InboundUpdate(event_id=str(event_id)[:200], external_id=str(issue.get("key") or ""),
                                  ticket_key=ours, comment=text[:10_000], author=author)]
        if kind != "jira:issue_updated":
            return []
        status = (issue.get("fields") or {}).get("status") or {}
        state = _CATEGORY_STATE.get((status.get("statusCategory") or {}).get("key"), "")
        if not state:
            return []
        author = str((payload.get("user") or {}).get("displayName") or "")[:200]
        return [InboundUpdate(event_id=str(event_id)[:200], external_id=str(issue.get("key") or ""),
                              ticket_key=ours, state=state, author=author,
                              comment=f"Jira: status {status.get('name') or state}" + (f" by {author}" if author
                                                                                        else ""))]


def _adf_text(node) -> str:
    if isinstance(node, dict):
        if node.get("type") == "text":
            return str(node.get("text") or "")
        parts = [_adf_text(child) for child in node.get("content") or []]
        return ("\n" if node.get("type") in ("paragraph", "doc") else "").join(parts)
    return ""
