"""Incident events for other apps (the ticketing outbox, notifications), so remediation never imports them.

* `incident_event` is sent INSIDE the transaction that made the change: a receiver that writes rows (a
  transactional outbox) commits or rolls back with the change. A receiver that raises aborts the change, so
  keep receivers to database writes.
* `incident_event_committed` is sent after that transaction committed (never for a change that rolled back):
  for anything that talks to the outside world.

Both carry `event`, an `IncidentEvent`.
"""

from dataclasses import asdict, dataclass, field
from datetime import datetime

from django.dispatch import Signal

incident_event = Signal()
incident_event_committed = Signal()


@dataclass(frozen=True)
class IncidentEvent:
    kind: str  # an `IncidentEventKind` value
    incident_id: int
    incident_key: str
    state: str
    at: datetime
    node_id: int | None = None
    step_index: int | None = None
    step_kind: str = ""
    step_status: str = ""
    detail: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)
