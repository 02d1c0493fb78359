"""The step interface between the remediation engine and whatever carries a step out (an executor).

The engine decides *what* runs and keeps the books (state committed before and after every call, retries,
timeouts, approvals, guardrails); an executor makes one step *happen* on a node — a runbook step for an
operator (the built-in `manual` executor), the agent's action channel, SSH, Slurm, Kubernetes, a cloud API, a
ticket. The interface is deliberately small:

* `start(ctx)` performs the side effect and must be idempotent by `ctx.idempotency_key`: the engine calls it
  again with the same key when a worker died before the outcome was committed, and only then.
* `poll(ctx)` is called for a step whose last answer was `waiting` with a `retry_after`; a step that waits
  with `retry_after=None` is completed from outside (an operator through the API, an inbound update).
* With `ctx.dry_run` an executor must cause no side effect and answer `done` with what it would have done.

Executors never touch the database of the engine; they return a `StepOutcome`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal, Protocol, runtime_checkable

OutcomeStatus = Literal["done", "waiting", "failed"]


@dataclass(frozen=True)
class StepContext:
    """Everything an executor needs, so it never has to look anything up twice."""

    incident_id: int
    incident_key: str
    node_id: int | None
    step_index: int
    attempt: int
    kind: str
    params: dict
    dry_run: bool
    idempotency_key: str  # f"{incident.key}:{step_index}:{attempt}"; executors and connectors pass it on
    facts: dict = field(default_factory=dict)  # node, pool, provider, GPU, finding facts (for runbooks, tickets)


@dataclass(frozen=True)
class StepOutcome:
    status: OutcomeStatus
    output: dict = field(default_factory=dict)
    message: str = ""
    # waiting only: poll again after this long; None = something outside completes the step.
    retry_after: timedelta | None = None
    # waiting only: who or what the step waits for (a `WaitingOn` value), shown on the incident.
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
    name: str  # "manual"; later "agent", "ssh", "slurm", "kubernetes", "aws", "webhook", "ticket"
    kinds: frozenset[str]  # the step kinds it can carry out; `executor_for` never hands it another

    def start(self, ctx: StepContext) -> StepOutcome: ...

    def poll(self, ctx: StepContext) -> StepOutcome: ...


# A collect_evidence outcome may carry what the executor read on the node under this output key; the engine files
# it as an evidence bundle of the incident's own (source: the executor's name) instead of as step output.
EXECUTOR_EVIDENCE = "evidence_data"


def idempotency_key(incident_key: str, step_index: int, attempt: int) -> str:
    return f"{incident_key}:{step_index}:{attempt}"
