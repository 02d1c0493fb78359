import json

from django.core.management.base import BaseCommand

from fleet.health.services.catalog import rule_catalog_sync
from fleet.health.services.evaluation import evaluate


class Command(BaseCommand):
    help = "Run one health evaluation cycle now (the whole fleet, or the given nodes) and print its counts."

    def add_arguments(self, parser):
        parser.add_argument("--node", type=int, action="append", dest="node_ids",
                            help="Evaluate only this node id (repeatable)")
        parser.add_argument("--sync-catalog", action="store_true",
                            help="First create rule rows for new rule definitions")

    def handle(self, *args, node_ids=None, sync_catalog=False, **options):
        if sync_catalog:
            created, updated = rule_catalog_sync()
            self.stdout.write(f"rule catalog: {created} created, {updated} refreshed")
        result = evaluate(node_ids=node_ids)
        self.stdout.write(json.dumps(result.as_dict()))
