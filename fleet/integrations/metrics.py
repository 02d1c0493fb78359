"""Prometheus families for integrations, read from the database at scrape time: the counters are committed with
each delivery, so every web process reports the same numbers whichever worker sent the message."""

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from .choices import MessageState


def integration_metrics():
    """Registered with telemetry's exposition in IntegrationsConfig.ready()."""
    from django.db.models import Count

    from .models import DeliveryCounter, OutboxMessage

    labels = ["connector", "integration"]
    families = {
        "sent": CounterMetricFamily("fleet_integration_messages_sent", "Messages delivered", labels=labels),
        "failed": CounterMetricFamily("fleet_integration_messages_failed",
                                      "Delivery attempts that failed (each try counts)", labels=labels),
        "dead_lettered": CounterMetricFamily("fleet_integration_messages_dead_lettered",
                                             "Messages moved to the dead-letter state", labels=labels),
    }
    rows = DeliveryCounter.objects.values_list("integration__kind", "integration__name", "sent", "failed",
                                               "dead_lettered")
    for kind, name, sent, failed, dead in rows:
        families["sent"].add_metric([kind, name], sent)
        families["failed"].add_metric([kind, name], failed)
        families["dead_lettered"].add_metric([kind, name], dead)
    yield from families.values()

    waiting = GaugeMetricFamily("fleet_integration_messages", "Outbox messages by state (not delivered yet, or "
                                                              "dead-lettered)", labels=[*labels, "state"])
    states = [MessageState.PENDING, MessageState.QUEUED, MessageState.SENDING, MessageState.RETRYING,
              MessageState.DEAD]
    for kind, name, state, count in (OutboxMessage.objects.filter(state__in=states)
                                     .values_list("integration__kind", "integration__name", "state")
                                     .annotate(count=Count("id")).order_by()):
        waiting.add_metric([kind, name, state], count)
    yield waiting
