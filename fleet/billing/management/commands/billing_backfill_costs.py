from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from fleet.billing.services import cost_days_backfill


class Command(BaseCommand):
    help = ("Record the cost of every past day (yesterday back, up to --days) that has no daily cost snapshot yet, "
            "at today's prices and marked estimated. Days already recorded are left as they are; safe to rerun.")

    def add_arguments(self, parser):
        parser.add_argument("--days", type=int, default=730, help="How many days back to fill (default 730)")

    def handle(self, *args, days=730, **options):
        if not 1 <= days <= 3660:
            raise CommandError("--days must be between 1 and 3660")
        closed = cost_days_backfill(now=timezone.now(), days=days)
        if closed:
            self.stdout.write(f"recorded {len(closed)} day(s) as estimated: {closed[0]} … {closed[-1]}")
        else:
            self.stdout.write("nothing to record: every day in range already has its snapshot")
