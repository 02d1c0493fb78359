"""Routing rules: which integrations get which events.

A rule's `match` holds lists; an event matches when, for every list present and non-empty, the event's value is
in it. Every matching rule of an enabled integration fires, and an integration gets one message per event
however many of its rules match. So "provider-owned faults go to that provider's support desk with the evidence
bundle, ours go to our on-call" is two rules: `{"responsible_parties": ["provider"], "providers": [3]}` → the
provider's e-mail integration, `{"responsible_parties": ["us"]}` → PagerDuty.
"""

from __future__ import annotations

from dataclasses import dataclass

from fleet.health.choices import Severity
from fleet.inventory.choices import DeliveryForm, Owner

from .choices import EventKind
from .models import Integration, RoutingRule

# match key → the event fact it tests
MATCH_FIELDS = {
    "event_kinds": "event_kind",
    "responsible_parties": "responsible_party",
    "severities": "severity",
    "providers": "provider_id",
    "pools": "pool_id",
    "sites": "site_id",
    "delivery_forms": "delivery_form",
    "rules": "rule",
}
MATCH_CHOICES = {
    # Tests and acknowledgements go to one integration, named by the operator: they are never routed.
    "event_kinds": [k for k in EventKind.values if k not in (EventKind.TEST, EventKind.TICKET_ACKNOWLEDGED)],
    "responsible_parties": Owner.values,
    "severities": Severity.values,
    "delivery_forms": DeliveryForm.values,
}
MATCH_ID_FIELDS = {"providers", "pools", "sites"}


@dataclass(frozen=True)
class EventFacts:
    """What routing looks at for one event."""

    event_kind: str
    responsible_party: str = ""
    severity: str = ""
    provider_id: int | None = None
    pool_id: int | None = None
    site_id: int | None = None
    delivery_form: str = ""
    rule: str = ""


def rule_matches(match: dict, facts: EventFacts) -> bool:
    for key, attribute in MATCH_FIELDS.items():
        wanted = match.get(key)
        if wanted and getattr(facts, attribute) not in wanted:
            return False
    return True


class Router:
    """The enabled rules of enabled integrations, loaded once for a batch of events (one query)."""

    def __init__(self):
        self.rules = list(RoutingRule.objects.filter(enabled=True, integration__enabled=True)
                          .select_related("integration").order_by("position", "id"))

    def __bool__(self) -> bool:
        return bool(self.rules)

    def integrations_for(self, facts: EventFacts) -> list[Integration]:
        chosen: dict[int, Integration] = {}
        for rule in self.rules:
            if rule.integration_id not in chosen and rule_matches(rule.match or {}, facts):
                chosen[rule.integration_id] = rule.integration
        return list(chosen.values())
