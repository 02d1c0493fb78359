"""Enrolment: operators mint tokens; agents swap a token plus their facts for a per-node credential."""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone
from rest_framework import status
from rest_framework.exceptions import AuthenticationFailed

from fleet.core.api.errors import DomainError
from fleet.core.audit import audit_context
from fleet.core.models import AuditEntry
from fleet.core.services import audit_record, revoke
from fleet.inventory.choices import BillingMode, NodeState
from fleet.inventory.models import Node

from .. import metrics
from ..models import EnrollmentToken, NodeCredential, ReenrollmentApproval
from ..secrets import ENROLLMENT_PREFIX, NODE_CREDENTIAL_PREFIX, hash_secret, new_secret
from .credentials import credentials_invalidate

logger = logging.getLogger(__name__)

MAX_APPROVAL = timedelta(days=7)


def enrollment_token_create(*, actor, name: str, provider, delivery_form: str,
                            billing_mode: str = BillingMode.ON_DEMAND, site=None, pool=None,
                            labels: dict | None = None, expires_at: datetime | None = None,
                            max_uses: int | None = None) -> tuple[EnrollmentToken, str]:
    key, prefix, key_hash = new_secret(ENROLLMENT_PREFIX)
    with transaction.atomic(), audit_context(actor=actor):
        token = EnrollmentToken.objects.create(
            name=name, prefix=prefix, key_hash=key_hash, created_by=actor if actor.is_authenticated else None,
            provider=provider, site=site, pool=pool, delivery_form=delivery_form, billing_mode=billing_mode,
            labels=labels or {}, expires_at=expires_at, max_uses=max_uses,
        )
    return token, key


def enrollment_token_revoke(*, token: EnrollmentToken, actor) -> EnrollmentToken:
    return revoke(instance=token, actor=actor)


def node_reenrollment_allow(*, node: Node, actor, until: datetime) -> ReenrollmentApproval:
    """Let `node`'s machine enrol again once before `until` without presenting its current credential."""
    now = timezone.now()
    if until <= now:
        raise DomainError("The approval must end in the future.", code="invalid", status_code=400,
                          fields={"minutes": ["Must be at least 1."]})
    if until - now > MAX_APPROVAL:
        raise DomainError(f"An approval lasts at most {MAX_APPROVAL.days} days.", code="invalid", status_code=400,
                          fields={"minutes": [f"At most {int(MAX_APPROVAL.total_seconds() // 60)}."]})
    with transaction.atomic():
        approval = ReenrollmentApproval.objects.create(node=node, approved_by=actor if actor.is_authenticated
                                                       else None, expires_at=until)
        audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=node, after={"until": until},
                     note="re-enrolment allowed")
    return approval


def node_reenrollment_cancel(*, node: Node, actor) -> int:
    """Withdraw every open approval for `node`; returns how many there were."""
    now = timezone.now()
    with transaction.atomic():
        cancelled = (ReenrollmentApproval.objects
                     .filter(node=node, used_at__isnull=True, cancelled_at__isnull=True, expires_at__gt=now)
                     .update(cancelled_at=now))
        if cancelled:
            audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=node,
                         note="re-enrolment approval withdrawn")
    return cancelled


@dataclass
class Enrollment:
    node: Node
    credential: str
    created: bool


def node_enroll(*, token_key: str, facts: dict, credential: str | None = None) -> Enrollment:
    """Exchange an enrolment token and the node's facts for a node and a fresh credential.

    A new machine id gets a new node with the token's defaults. A machine id that is already enrolled is not a
    secret (any viewer can read it), so enrolling it again needs the token's scope (provider, pool, delivery
    form) to match the node, and proof: the node's current `credential`, or an open operator approval
    (`node_reenrollment_allow`), which is used up. It then gets its node back and its old credentials are
    revoked, so a reinstalled agent never leaves a second live secret behind. A refused re-enrolment changes
    nothing.
    """
    with transaction.atomic():
        token = (EnrollmentToken.objects.select_for_update()
                 .filter(key_hash=hash_secret(token_key)).first())
        if token is None:
            raise AuthenticationFailed("Unknown enrolment token.")
        if not token.is_usable:
            raise AuthenticationFailed("Enrolment token is expired, revoked or used up.")

        cloud = facts.get("cloud") or {}
        node = Node.objects.select_for_update().filter(machine_id=facts["machine_id"]).first()
        created = node is None
        note = "enrolled" if created else _reenrollment_proof(node=node, token=token, credential=credential)
        # One audited story per enrolment: the node's create or update and its new credential, by the token.
        with audit_context(actor=f"enrolment:{token.prefix}", note=note):
            if created:
                node = Node.objects.create(
                    hostname=facts["hostname"], machine_id=facts["machine_id"], provider=token.provider,
                    site=token.site, pool=token.pool, delivery_form=token.delivery_form,
                    billing_mode=token.billing_mode, labels=dict(token.labels),
                    expected_gpu_count=facts.get("gpu_count") or 0,
                    expected_gpu_model=facts.get("gpu_model") or "",
                    instance_id=cloud.get("instance_id") or "", instance_type=cloud.get("instance_type") or "",
                    state=NodeState.ACTIVE,
                )
            else:
                node.hostname = facts["hostname"]
                node.instance_id = cloud.get("instance_id") or node.instance_id
                node.instance_type = cloud.get("instance_type") or node.instance_type
                if node.state in (NodeState.ENROLLING, NodeState.PREEMPTED, NodeState.REPLACING):
                    node.state = NodeState.ACTIVE
                node.save(update_fields=["hostname", "instance_id", "instance_type", "state", "updated_at"])
                NodeCredential.objects.filter(node=node, revoked_at__isnull=True).update(
                    revoked_at=timezone.now())
                credentials_invalidate(node_id=node.pk)

            key, prefix, key_hash = new_secret(NODE_CREDENTIAL_PREFIX)
            NodeCredential.objects.create(node=node, prefix=prefix, key_hash=key_hash, enrolled_with=token)
        EnrollmentToken.objects.filter(pk=token.pk).update(uses=F("uses") + 1)
    return Enrollment(node=node, credential=key, created=created)


def _reenrollment_proof(*, node: Node, token: EnrollmentToken, credential: str | None) -> str:
    """Check that this enrolment may take `node` over; return how it proved it (the audit note), or raise.

    Raises before anything is written, so a refusal leaves the node, its credentials and the token as they were.
    """
    scope = {"provider": (token.provider_id, node.provider_id), "pool": (token.pool_id, node.pool_id),
             "delivery_form": (token.delivery_form, node.delivery_form)}
    mismatched = [name for name, (theirs, ours) in scope.items() if theirs != ours]
    if mismatched:
        _refuse("token_scope_mismatch", node, token)
        raise DomainError(
            "This machine is already enrolled, and this enrolment token is for a different "
            f"{' / '.join(name.replace('_', ' ') for name in mismatched)}; use a token for the node's own.",
            code="token_scope_mismatch", status_code=status.HTTP_403_FORBIDDEN)
    if credential:
        owned = NodeCredential.objects.filter(node=node, key_hash=hash_secret(credential),
                                              revoked_at__isnull=True).exists()
        if owned:
            return "re-enrolled (current credential)"
    approval = (ReenrollmentApproval.objects.select_for_update()
                .filter(node=node, used_at__isnull=True, cancelled_at__isnull=True, expires_at__gt=timezone.now())
                .order_by("expires_at").first())
    if approval is not None:
        approval.used_at = timezone.now()
        approval.save(update_fields=["used_at"])
        return f"re-enrolled (operator approval {approval.pk})"
    if credential:
        _refuse("invalid_credential", node, token)
        raise DomainError("This machine is already enrolled and the credential sent is not its current one. "
                          "An operator can allow re-enrolment: POST /api/v1/nodes/<node id>/allow-reenrollment/.",
                          code="invalid_credential", status_code=status.HTTP_403_FORBIDDEN)
    _refuse("not_proven", node, token)
    raise DomainError("This machine is already enrolled. Enrol again from the node with its current credential, "
                      "or ask an operator to allow re-enrolment: POST /api/v1/nodes/<node id>/allow-reenrollment/.",
                      code="already_enrolled", status_code=status.HTTP_409_CONFLICT)


def _refuse(reason: str, node: Node, token: EnrollmentToken) -> None:
    # Logged and counted, not written: the refusal must leave the database as it was.
    metrics.enrollment_refused(reason)
    logger.warning("refused re-enrolment of node %s with enrolment token %s…: %s", node.pk, token.prefix, reason)
