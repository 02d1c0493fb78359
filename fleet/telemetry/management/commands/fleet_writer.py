import logging
import signal

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from fleet.telemetry.services.stream import queue_enabled, stream_name
from fleet.telemetry.services.writer import Writer


class Command(BaseCommand):
    help = ("Drain the ingest stream (Redis) into the database in batches: the queued half of report ingestion "
            "(docs/telemetry.md). Run one or more; they share the stream. SIGTERM finishes the batch in hand.")

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=settings.INGEST_WRITER_BATCH,
                            help="entries per batch (default INGEST_WRITER_BATCH)")
        parser.add_argument("--consumer", default="", help="consumer name in the group (default host-pid)")
        parser.add_argument("--claim-idle", type=float, default=None,
                            help="seconds before another writer's unacknowledged entries are taken over "
                                 "(default INGEST_WRITER_CLAIM_IDLE_S)")

    def handle(self, *args, batch: int, consumer: str, claim_idle: float | None, **options):
        if not queue_enabled():
            raise CommandError("The ingest queue is off (INGEST_QUEUE, needs REDIS_URL): reports are written in the "
                               "request and there is nothing to drain.")
        if not logging.getLogger().handlers:
            logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        writer = Writer(consumer=consumer or None, batch=batch, claim_idle_s=claim_idle)

        def stop(*_):
            writer.stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self.stdout.write(f"fleet_writer {writer.consumer}: draining {stream_name()}")
        self.stdout.flush()
        writer.run()
