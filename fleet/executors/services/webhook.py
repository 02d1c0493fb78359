"""Signed webhooks to the user's own provisioning system (Terraform / Ansible pipeline, another cloud's API), for
replacements on clouds without a built-in executor and for any step a site automates itself.

Each request is POSTed as JSON with
* `X-Fleet-Signature: t=<unix time>,v1=<hex HMAC-SHA256 of "<t>.<body>" under the pool's webhook secret>`,
* `X-Fleet-Delivery: <request id>` and `Idempotency-Key: <incident>:<step>:<attempt>` (the same on every retry),
and carries a `callback_url`. The receiver answers 2xx to accept, then (at once or later) POSTs to the callback
URL `{"status": "in_progress" | "done" | "failed", "message": "...", "replacement": {...}}`, signed the same way.
A delivery that fails is retried with back-off; a callback older than five minutes, unsigned or signed with
another secret is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from datetime import datetime, timedelta

import urllib3
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from fleet.core import outbound
from fleet.core.api.errors import DomainError

from ..choices import ConfiguredExecutor, ExternalState
from ..models import ExecutorConfig, ExternalRequest
from .executor_configs import executor_secret

SIGNATURE_HEADER = "X-Fleet-Signature"
MAX_SKEW_S = 300
MAX_ATTEMPTS = 8
BACKOFF_BASE_S = 30
CALLBACK_STATES = {"in_progress": ExternalState.ACCEPTED, "accepted": ExternalState.ACCEPTED,
                   "done": ExternalState.DONE, "ready": ExternalState.DONE, "failed": ExternalState.FAILED}


def sign(secret: str, body: bytes, *, at: int | None = None) -> str:
    stamp = int(time.time()) if at is None else at
    digest = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={stamp},v1={digest}"


def verify(secret: str, body: bytes, header: str, *, now: float | None = None) -> str:
    """'' when `header` is a valid, fresh signature of `body`; otherwise why not."""
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        stamp = int(parts.get("t", ""))
    except ValueError:
        return f"no {SIGNATURE_HEADER} header of the form t=<unix time>,v1=<hex>"
    if abs((time.time() if now is None else now) - stamp) > MAX_SKEW_S:
        return "the signature's time is more than five minutes off (replayed, or a clock is wrong)"
    expected = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, parts.get("v1", "")):
        return "the signature does not match (another secret, or the body was changed)"
    return ""


def callback_url(config: ExecutorConfig, request: ExternalRequest) -> str:
    base = config.settings.get("callback_base_url") or settings.FLEET_PUBLIC_URL
    if not base:
        raise DomainError("set FLEET_PUBLIC_URL or the webhook's settings.callback_base_url: the receiver needs a "
                          "URL to call back", code="no_callback_url")
    return f"{base.rstrip('/')}/api/v1/executor-callbacks/{request.public_id}"


def webhook_deliver(*, config: ExecutorConfig, request: ExternalRequest, payload: dict,
                    now: datetime | None = None) -> ExternalRequest:
    """Send (or re-send) the request if it is due; a 2xx answer means accepted, anything else is retried later."""
    now = now or timezone.now()
    if request.state != ExternalState.PENDING or (request.next_attempt_at and request.next_attempt_at > now):
        return request
    body_data = {**payload, "id": str(request.public_id), "idempotency_key": request.idempotency_key,
                 "callback_url": callback_url(config, request)}
    body = json.dumps(body_data, sort_keys=True, default=str).encode()
    request.payload, request.attempts = body_data, request.attempts + 1
    status, text = _post(config.settings["url"], body, timeout=config.settings.get("timeout_s", 10), headers={
        "Content-Type": "application/json", "User-Agent": "gpu-fleet-control-plane",
        SIGNATURE_HEADER: sign(executor_secret(config), body), "X-Fleet-Delivery": str(request.public_id),
        "Idempotency-Key": request.idempotency_key})
    with transaction.atomic():
        # A receiver may call back before its 2xx reaches us: its word is kept, only the delivery is counted.
        current = ExternalRequest.objects.select_for_update().get(pk=request.pk)
        current.payload, current.attempts = body_data, request.attempts
        current.detail = {**current.detail, "last_status": status, "last_answer": text[:1000]}
        if current.state == ExternalState.PENDING:
            _delivered(current, config, status, text, now)
        current.save()
    return current


def _post(url: str, body: bytes, *, timeout: float, headers: dict) -> tuple[int | None, str]:
    """POST through the outbound policy (no loopback, metadata or unlisted private address; no redirects: a 3xx
    is an answer like any other). (status, first 4 KB of the answer) or (None, why it could not be sent)."""
    try:
        outbound.check_url(url)
        answer = outbound.GuardedPoolManager().request(
            "POST", url, body=body, headers=headers, redirect=False, retries=False, preload_content=False,
            timeout=urllib3.Timeout(connect=min(timeout, 10), read=timeout))
        return answer.status, outbound.read_capped(answer, 4096).decode("utf-8", "replace")
    except outbound.OutboundRefused as exc:
        return None, f"refused by the outbound policy: {exc}"
    except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
        refusal = outbound.is_policy_refusal(exc)
        if refusal:
            return None, f"refused by the outbound policy: {refusal}"
        if isinstance(exc, urllib3.exceptions.NewConnectionError | urllib3.exceptions.ConnectTimeoutError):
            return None, "could not connect (refused, unreachable or timed out)"
        return None, f"{type(exc).__name__}: {exc}"


def _delivered(request: ExternalRequest, config: ExecutorConfig, status: int | None, text: str,
               now: datetime) -> None:
    if status is not None and 200 <= status < 300:
        request.state, request.message, request.next_attempt_at = ExternalState.ACCEPTED, \
            f"accepted by {config.settings['url']} (HTTP {status}); waiting for its callback", None
    elif request.attempts >= MAX_ATTEMPTS:
        request.state, request.finished_at = ExternalState.FAILED, now
        request.message = f"{config.settings['url']} did not accept it after {request.attempts} attempts " \
                          f"(last: {status or text})"[:1000]
    else:
        delay = timedelta(seconds=BACKOFF_BASE_S * 2 ** (request.attempts - 1))
        request.next_attempt_at = now + delay
        request.message = f"delivery {request.attempts} failed ({status or text}); next try in " \
                          f"{int(delay.total_seconds())} s"[:1000]


def webhook_callback(*, public_id: str, body: bytes, signature: str) -> ExternalRequest:
    """The receiver's word on a request: checked against the pool's webhook secret, then recorded."""
    try:
        public_id = str(uuid.UUID(public_id))
    except ValueError:
        raise DomainError("No such webhook request.", code="not_found", status_code=404) from None
    request = ExternalRequest.objects.filter(public_id=public_id, executor=ConfiguredExecutor.WEBHOOK).first()
    if request is None:
        raise DomainError("No such webhook request.", code="not_found", status_code=404)
    config = ExecutorConfig.objects.filter(pool_id=request.pool_id, executor=ConfiguredExecutor.WEBHOOK).first()
    problem = "this pool has no webhook settings any more" if config is None else \
        verify(executor_secret(config), body, signature)
    if problem:
        raise DomainError(f"Callback refused: {problem}.", code="bad_signature", status_code=401)
    try:
        data = json.loads(body)
    except ValueError:
        raise DomainError("The callback body is not JSON.", code="invalid", status_code=400,
                          fields={"body": ["Not JSON."]}) from None
    status = data.get("status") if isinstance(data, dict) else None
    if status not in CALLBACK_STATES:
        raise DomainError("Unknown status.", code="invalid", status_code=400,
                          fields={"status": [f"One of {', '.join(CALLBACK_STATES)}."]})
    with transaction.atomic():
        request = ExternalRequest.objects.select_for_update().get(pk=request.pk)
        if request.state in (ExternalState.DONE, ExternalState.FAILED):
            return request  # the first final word stands; repeats are harmless
        message = data.get("message") if isinstance(data.get("message"), str) else ""
        request.state = CALLBACK_STATES[status]
        request.message = (message or f"callback: {status}")[:1000]
        replacement = data.get("replacement")
        if isinstance(replacement, dict):
            request.detail = {**request.detail, "replacement": {str(k)[:64]: str(v)[:200]
                                                                for k, v in list(replacement.items())[:20]}}
        if request.state in (ExternalState.DONE, ExternalState.FAILED):
            request.finished_at = timezone.now()
        request.save()
    return request
