"""A test executor with a side effect you can count from outside its process: each start() appends to a ledger
file (fsynced) and each new idempotency key produces one effect line. Import the module to register it (the
worker does so through REMEDIATION_EXECUTOR_MODULES). With FLEET_TEST_LEDGER_PAUSE=<kind> it sleeps after the
side effect of that kind — the moment a test kills the worker."""

import json
import os
import time
from pathlib import Path

from fleet.remediation.executors import register
from fleet.remediation.steps import StepOutcome


class LedgerExecutor:
    name = "ledger"
    kinds = frozenset({"cordon", "drain"})

    @staticmethod
    def _path() -> Path:
        return Path(os.environ["FLEET_TEST_LEDGER"])

    def _append(self, record: dict) -> None:
        with open(self._path(), "a") as ledger:
            ledger.write(json.dumps(record) + "\n")
            ledger.flush()
            os.fsync(ledger.fileno())

    def records(self) -> list[dict]:
        path = self._path()
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def start(self, ctx):
        self._append({"call": ctx.idempotency_key, "pid": os.getpid()})
        if any(r.get("effect") == ctx.idempotency_key for r in self.records()):
            return StepOutcome.done("already done (ledger)", pid=os.getpid())
        self._append({"effect": ctx.idempotency_key, "kind": ctx.kind, "pid": os.getpid()})
        if os.environ.get("FLEET_TEST_LEDGER_PAUSE") == ctx.kind:
            time.sleep(120)
        return StepOutcome.done(f"{ctx.kind} done", pid=os.getpid())

    def poll(self, ctx):
        return StepOutcome.done("")


executor = register(LedgerExecutor())
