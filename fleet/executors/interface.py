"""The remediation step interface as this app uses it, in one place: the engine's own types and registry
(`fleet.remediation.steps`, `fleet.remediation.executors`) and the engine's vocabulary (step kinds, what a step
waits for) under short names."""

from fleet.remediation.choices import StepKind, WaitingOn
from fleet.remediation.executors import executor_named, register
from fleet.remediation.steps import EXECUTOR_EVIDENCE, Executor, StepContext, StepOutcome, idempotency_key

__all__ = ["EXECUTOR_EVIDENCE", "Executor", "StepContext", "StepOutcome", "executor_named", "idempotency_key",
           "register"]

CORDON = StepKind.CORDON.value
DRAIN = StepKind.DRAIN.value
COLLECT_EVIDENCE = StepKind.COLLECT_EVIDENCE.value
RESET_GPU = StepKind.RESET_GPU.value
REBOOT = StepKind.REBOOT.value
VERIFY = StepKind.VERIFY.value
RUN_DIAGNOSTICS = StepKind.RUN_DIAGNOSTICS.value
RETURN_TO_SERVICE = StepKind.RETURN_TO_SERVICE.value
REQUEST_REPLACEMENT = StepKind.REQUEST_REPLACEMENT.value
ROLLBACK_STACK = StepKind.ROLLBACK_STACK.value
WAITING_OPERATOR = WaitingOn.OPERATOR.value
WAITING_EXECUTOR = WaitingOn.EXECUTOR.value
WAITING_REPLACEMENT = WaitingOn.REPLACEMENT.value
WAITING_VERIFICATION = WaitingOn.VERIFICATION.value
