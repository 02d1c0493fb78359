"""The remediation step interface as this app sees it: the one module to change when the engine's lands.

The remediation engine (issue 13) owns `StepContext`, `StepOutcome`, the `Executor` protocol and the registry.
Until `fleet.remediation` is on this branch, this module carries a copy of that interface with the same names,
fields and helpers (`fleet/remediation/steps.py` and `fleet/remediation/executors.py` on the remediation
branch), so that every executor here is written and tested against it; the swap is this module importing them
instead.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal, Protocol, runtime_checkable

OutcomeStatus = Literal["done", "waiting", "failed"]


@dataclass(frozen=True)
class StepContext:
    incident_id: int
    incident_key: str
    node_id: int | None
    step_index: int
    attempt: int
    kind: str
    params: dict
    dry_run: bool
    idempotency_key: str
    facts: dict = field(default_factory=dict)


@dataclass(frozen=True)
class StepOutcome:
    status: OutcomeStatus
    output: dict = field(default_factory=dict)
    message: str = ""
    retry_after: timedelta | None = None
    waiting_on: str = ""

    @classmethod
    def done(cls, message: str = "", **output) -> StepOutcome:
        return cls("done", output, message)

    @classmethod
    def waiting(cls, message: str, *, retry_after: timedelta | None = None, waiting_on: str = "",
                **output) -> StepOutcome:
        return cls("waiting", output, message, retry_after, waiting_on)

    @classmethod
    def failed(cls, message: str, **output) -> StepOutcome:
        return cls("failed", output, message)


@runtime_checkable
class Executor(Protocol):
    name: str
    kinds: frozenset[str]

    def start(self, ctx: StepContext) -> StepOutcome: ...

    def poll(self, ctx: StepContext) -> StepOutcome: ...


_registry: dict[str, Executor] = {}
_lock = threading.Lock()


def register(executor: Executor) -> Executor:
    if not isinstance(executor, Executor):
        raise TypeError(f"{executor!r} does not implement the Executor protocol")
    if not executor.name or not isinstance(executor.kinds, frozenset):
        raise TypeError("an executor needs a name and a frozenset of step kinds")
    with _lock:
        _registry[executor.name] = executor
    return executor


def executor_named(name: str) -> Executor | None:
    with _lock:
        return _registry.get(name)


def idempotency_key(incident_key: str, step_index: int, attempt: int) -> str:
    return f"{incident_key}:{step_index}:{attempt}"


# The remediation engine's step kinds (its `StepKind` values) that executors here carry out.
CORDON = "cordon"
DRAIN = "drain"
COLLECT_EVIDENCE = "collect_evidence"
RESET_GPU = "reset_gpu"
REBOOT = "reboot"
VERIFY = "verify"
RETURN_TO_SERVICE = "return_to_service"
REQUEST_REPLACEMENT = "request_replacement"
ROLLBACK_STACK = "rollback_stack"
# What a step waits for (the engine's `WaitingOn` values).
WAITING_OPERATOR = "operator"
WAITING_EXECUTOR = "executor"
WAITING_REPLACEMENT = "replacement"
