"""The agent action channel, server side: actions wait in the database until the node's next report; the answer
to that report carries them, signed for that node; a later report carries each outcome.

The node is in charge: it runs only what its own config allows and refuses anything tampered with, unknown or
expired, saying so. Everything a node reports is a claim: an outcome counts only for an action of *that* node
(its credential is its identity) that is still open, and the first outcome wins.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from rest_framework.exceptions import ValidationError

from fleet.core.api.errors import DomainError
from fleet.core.models import AuditEntry
from fleet.core.services import audit_record
from fleet.telemetry.models import NodeStatus
from fleet.telemetry.validation import parse_time
from fleet_agent.protocol import DIAG_LEVELS, HOOK_NAME_PATTERN, MAX_GPU_INDEX, action_signature
from fleet_agent.timeutil import rfc3339

from ..choices import AGENT_ACTION_OPEN, AgentActionKind, AgentActionState
from ..models import AgentAction

log = logging.getLogger(__name__)

DEFAULT_TTL = timedelta(hours=1)
MAX_TTL = timedelta(days=7)
# A delivered action may still be running on the node after its not-after time (the node checks it when the action
# arrives); it is written off only after the longest a hook may run, and a margin.
RESULT_GRACE = timedelta(hours=1, minutes=10)
MAX_DELIVERED = 20
_HOOK = re.compile(HOOK_NAME_PATTERN)
RESULT_STATES = {"done": AgentActionState.DONE, "failed": AgentActionState.FAILED,
                 "refused": AgentActionState.REFUSED, "expired": AgentActionState.EXPIRED,
                 "interrupted": AgentActionState.INTERRUPTED}
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def validate_action_params(kind: str, params: dict | None) -> dict:
    """The parameters of each kind, checked as strictly as the agent checks them."""
    params = dict(params or {})
    if kind not in AgentActionKind.values:
        raise ValidationError({"kind": [f"Unknown action {kind!r}; one of {', '.join(AgentActionKind.values)}."]})
    if kind == AgentActionKind.GPU_RESET:
        index = params.pop("gpu_index", None)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= MAX_GPU_INDEX:
            raise ValidationError({"params.gpu_index": [f"A GPU index from 0 to {MAX_GPU_INDEX}."]})
        cleaned: dict = {"gpu_index": index}
    elif kind == AgentActionKind.RUN_HOOK:
        name = params.pop("name", None)
        if not isinstance(name, str) or not _HOOK.match(name):
            raise ValidationError({"params.name": ["A hook name: letters, digits, '.', '_', '-', no path."]})
        timeout = params.pop("timeout_s", 600)
        if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 3600:
            raise ValidationError({"params.timeout_s": ["A hook's timeout is 1 to 3600 seconds."]})
        cleaned = {"name": name, "timeout_s": timeout}
    elif kind == AgentActionKind.DCGM_DIAG:
        level = params.pop("level", None)
        if isinstance(level, bool) or level not in DIAG_LEVELS:
            raise ValidationError({"params.level": [f"A DCGM diagnostic level: {', '.join(map(str, DIAG_LEVELS))}."]})
        cleaned = {"level": level}
    else:
        cleaned = {}
    if params:
        raise ValidationError({f"params.{name}": [f"{kind} takes no parameter {name!r}."] for name in params})
    return cleaned


def agent_action_request(*, node, kind: str, params: dict | None, actor, requested_by: str = "",
                         idempotency_key: str | None = None, incident_key: str = "",
                         ttl: timedelta = DEFAULT_TTL, now: datetime | None = None) -> tuple[AgentAction, bool]:
    """Queue an action for a node; (action, created). The same idempotency key returns the first action."""
    now = now or timezone.now()
    params = validate_action_params(kind, params)
    if not timedelta(seconds=30) <= ttl <= MAX_TTL:
        raise ValidationError({"ttl_s": ["An action lives between 30 seconds and 7 days."]})
    if idempotency_key:
        existing = AgentAction.objects.filter(idempotency_key=idempotency_key).first()
        if existing is not None:
            return existing, False
    boot_id = ""
    if kind == AgentActionKind.REBOOT:
        boot_id = NodeStatus.objects.filter(node_id=node.pk).values_list("boot_id", flat=True).first() or ""
    try:
        with transaction.atomic():
            action = AgentAction.objects.create(
                node=node, kind=kind, params=params, not_after=now + ttl, idempotency_key=idempotency_key,
                incident_key=incident_key, requested_by=(requested_by or str(actor or "system"))[:150],
                boot_id_before=boot_id, created_at=now)
            audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=node,
                         note=f"agent action {kind} #{action.pk} queued",
                         after={"action": str(action.public_id), "kind": kind, "params": params,
                                "not_after": action.not_after, "incident": incident_key})
    except IntegrityError:
        return AgentAction.objects.get(idempotency_key=idempotency_key), False
    return action, True


def agent_action_cancel(*, action: AgentAction, actor) -> AgentAction:
    with transaction.atomic():
        action = AgentAction.objects.select_for_update().get(pk=action.pk)
        if action.state != AgentActionState.PENDING:
            raise DomainError(f"Only an action no node has taken yet can be cancelled; this one is {action.state}.",
                              code="not_pending")
        action.state, action.finished_at, action.message = AgentActionState.CANCELLED, timezone.now(), "cancelled"
        action.save(update_fields=["state", "finished_at", "message"])
        audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=action.node,
                     note=f"agent action {action.kind} #{action.pk} cancelled")
    return action


# -- the reports exchange ------------------------------------------------------------------------------------------

def agent_action_exchange(*, node_id: int, signing_key: str, actions_open: bool, reports: list[dict],
                          now: datetime) -> dict:
    """What the answer to a report batch adds: the node's open actions. Outcomes in the batch are recorded first,
    so an action finished in this batch is not handed out again. `actions_open` comes with the credential (one
    statement), so a node with nothing waiting costs no query here."""
    results = [result for report in reports for result in report.get("action_results") or ()]
    if results:
        agent_action_results_record(node_id=node_id, results=results, now=now)
    if not actions_open:
        return {}
    actions = agent_actions_deliver(node_id=node_id, signing_key=signing_key, now=now)
    return {"actions": actions} if actions else {}


def agent_actions_deliver(*, node_id: int, signing_key: str, now: datetime) -> list[dict]:
    rows = list(AgentAction.objects.filter(node_id=node_id, state__in=sorted(AGENT_ACTION_OPEN))
                .order_by("created_at", "pk")[:MAX_DELIVERED])
    live, stale = [], []
    for row in rows:
        deadline = row.not_after if row.state == AgentActionState.PENDING else row.not_after + RESULT_GRACE
        (live if deadline > now else stale).append(row)
    for row in stale:
        taken = row.state == AgentActionState.DELIVERED
        AgentAction.objects.filter(pk=row.pk, state=row.state).update(
            state=AgentActionState.EXPIRED, finished_at=now,
            message="the node took it but never reported an outcome" if taken else
            "expired before the node's next report")
    live = [row for row in live if row.not_after > now]
    if not live or not signing_key:
        return []
    key = signing_key.encode()
    payloads = []
    for row in live:
        payload = {"id": str(row.public_id), "node_id": node_id, "kind": row.kind, "params": row.params,
                   "not_after": rfc3339(row.not_after), "reason": row.incident_key}
        payload["signature"] = action_signature(key, payload)
        payloads.append(payload)
    AgentAction.objects.filter(pk__in=[row.pk for row in live], delivered_at__isnull=True).update(delivered_at=now)
    AgentAction.objects.filter(pk__in=[row.pk for row in live]).update(
        deliveries=F("deliveries") + 1, state=AgentActionState.DELIVERED)
    return payloads


def _parse_time(value) -> datetime | None:
    try:
        return parse_time(value) if isinstance(value, str) else None
    except ValueError:
        return None


def agent_action_results_record(*, node_id: int, results: list[dict], now: datetime) -> int:
    """Store outcomes the node reported; returns how many counted. Ids that are not this node's open actions are
    claims with nothing behind them: ignored (and logged)."""
    by_id = {str(result.get("id", "")).lower(): result for result in results}
    ids = [value for value in by_id if _UUID.match(value)]
    counted = 0
    for row in AgentAction.objects.filter(node_id=node_id, public_id__in=ids, state__in=sorted(AGENT_ACTION_OPEN)):
        result = by_id[str(row.public_id)]
        state = RESULT_STATES.get(result.get("result"))
        if state is None:
            continue
        updated = AgentAction.objects.filter(pk=row.pk, state__in=sorted(AGENT_ACTION_OPEN)).update(
            state=state, exit_status=result.get("exit_status"), message=str(result.get("message") or "")[:4096],
            stdout_tail=str(result.get("stdout_tail") or ""), stderr_tail=str(result.get("stderr_tail") or ""),
            evidence=result.get("evidence") or None, duration_s=result.get("duration_s"),
            started_at=_parse_time(result.get("started_at")), finished_at=_parse_time(result.get("finished_at")),
            reported_at=now)
        counted += updated
    ignored = len(by_id) - counted
    if ignored:
        log.info("node %s reported %d action outcome(s) for no open action of its own (repeats or claims)", node_id,
                 ignored)
    return counted


def agent_rebooted(*, action: AgentAction) -> bool:
    """The node has reported since the reboot with another boot id than before it."""
    now = NodeStatus.objects.filter(node_id=action.node_id).values_list("boot_id", flat=True).first() or ""
    return bool(now) and now != action.boot_id_before
