"""The connector registry: one module per external system, all behind `base.Connector`."""

from __future__ import annotations

from .base import Connector
from .email import EmailConnector
from .jira import JiraConnector
from .opsgenie import OpsgenieConnector
from .pagerduty import PagerDutyConnector
from .servicenow import ServiceNowConnector
from .slack import SlackConnector
from .webhook import WebhookConnector

CONNECTORS: dict[str, Connector] = {c.kind: c for c in (
    WebhookConnector(), PagerDutyConnector(), OpsgenieConnector(), ServiceNowConnector(), JiraConnector(),
    EmailConnector(), SlackConnector())}


def connector_for(kind: str) -> Connector:
    try:
        return CONNECTORS[kind]
    except KeyError:
        raise ValueError(f"no connector of kind {kind!r}") from None
