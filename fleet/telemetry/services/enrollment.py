"""Enrolment: operators mint tokens; agents swap a token plus their facts for a per-node credential."""

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import F
from django.utils import timezone
from rest_framework.exceptions import AuthenticationFailed

from fleet.core.models import AuditEntry
from fleet.core.services import audit_record, revoke
from fleet.inventory.choices import NodeState
from fleet.inventory.models import Node

from ..models import EnrollmentToken, NodeCredential
from ..secrets import ENROLLMENT_PREFIX, NODE_CREDENTIAL_PREFIX, hash_secret, new_secret


def enrollment_token_create(*, actor, name: str, provider, delivery_form: str, billing_mode: str,
                            site=None, pool=None, labels: dict | None = None, expires_at: datetime | None = None,
                            max_uses: int | None = None) -> tuple[EnrollmentToken, str]:
    key, prefix, key_hash = new_secret(ENROLLMENT_PREFIX)
    with transaction.atomic():
        token = EnrollmentToken.objects.create(
            name=name, prefix=prefix, key_hash=key_hash, created_by=actor if actor.is_authenticated else None,
            provider=provider, site=site, pool=pool, delivery_form=delivery_form, billing_mode=billing_mode,
            labels=labels or {}, expires_at=expires_at, max_uses=max_uses,
        )
        audit_record(actor=actor, action=AuditEntry.Action.CREATE, instance=token,
                     after={"name": name, "provider": provider.pk, "pool": getattr(pool, "pk", None),
                            "delivery_form": delivery_form, "billing_mode": billing_mode,
                            "expires_at": expires_at, "max_uses": max_uses})
    return token, key


def enrollment_token_revoke(*, token: EnrollmentToken, actor) -> EnrollmentToken:
    return revoke(instance=token, actor=actor)


@dataclass
class Enrollment:
    node: Node
    credential: str
    created: bool


def node_enroll(*, token_key: str, facts: dict) -> Enrollment:
    """Exchange an enrolment token and the node's facts for a node and a fresh credential.

    The same machine (machine_id) enrolling again gets its existing node back and its old credentials
    revoked, so a reinstalled agent never leaves a second live secret behind.
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
        if created:
            node = Node.objects.create(
                hostname=facts["hostname"], machine_id=facts["machine_id"], provider=token.provider,
                site=token.site, pool=token.pool, delivery_form=token.delivery_form,
                billing_mode=token.billing_mode, labels=dict(token.labels),
                expected_gpu_count=facts.get("gpu_count") or 0, expected_gpu_model=facts.get("gpu_model") or "",
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
            NodeCredential.objects.filter(node=node, revoked_at__isnull=True).update(revoked_at=timezone.now())

        key, prefix, key_hash = new_secret(NODE_CREDENTIAL_PREFIX)
        NodeCredential.objects.create(node=node, prefix=prefix, key_hash=key_hash, enrolled_with=token)
        EnrollmentToken.objects.filter(pk=token.pk).update(uses=F("uses") + 1)
        audit_record(actor=f"enrolment:{token.prefix}", action=AuditEntry.Action.ACTION, instance=node,
                     note="enrolled" if created else "re-enrolled")
    return Enrollment(node=node, credential=key, created=created)
