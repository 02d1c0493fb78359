"""What telemetry tells the apps above it, without importing them (docs/architecture.md).

Both signals are sent after the transaction that stored the facts has committed, so a receiver sees them and
may enqueue work that reads them. Receivers connect in their app's `AppConfig.ready()`.
"""

from django.dispatch import Signal

# kwargs: node_id (int), notice_event_ids (list[int]: the stored preemption-notice events, maybe empty).
# Sent once per ingested batch that carried actionable events; receivers must not raise (ingest has answered
# the agent already, and the periodic tasks catch up on anything a receiver could not start).
urgent_events_stored = Signal()

# kwargs: node_ids (list[int]: nodes flagged silent by this sweep), now (datetime: the sweep's time).
nodes_went_silent = Signal()
