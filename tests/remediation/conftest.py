import pytest

from fleet.remediation.executors import register, registered, unregister
from fleet.remediation.steps import StepOutcome


class RecordingExecutor:
    """A test executor with a real side effect log: every start() is recorded with its idempotency key, and a
    repeated key is answered from the log (idempotent), like a well-behaved connector."""

    name = "recording"

    def __init__(self, kinds, answers=None):
        self.kinds = frozenset(kinds)
        self.answers = answers or {}
        self.calls: list[str] = []
        self.effects: dict[str, StepOutcome] = {}

    def start(self, ctx):
        self.calls.append(ctx.idempotency_key)
        if ctx.idempotency_key in self.effects:
            return self.effects[ctx.idempotency_key]
        answer = self.answers.get(ctx.kind, StepOutcome.done("recorded", key=ctx.idempotency_key))
        outcome = answer(ctx) if callable(answer) else answer
        self.effects[ctx.idempotency_key] = outcome
        return outcome

    def poll(self, ctx):
        answer = self.answers.get(f"poll:{ctx.kind}", StepOutcome.done("polled"))
        return answer(ctx) if callable(answer) else answer


@pytest.fixture
def recording():
    """Install a `recording` executor; pools list it with `executors=["recording"]`."""
    made = []

    def make(kinds, answers=None):
        executor = RecordingExecutor(kinds, answers)
        register(executor)
        made.append(executor)
        return executor

    yield make
    if "recording" in registered():
        unregister("recording")

