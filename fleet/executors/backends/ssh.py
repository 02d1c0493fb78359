"""The `ssh` executor: remediation steps carried out on a node's registered SSH host.

collect_evidence → remote diagnostics (the way to learn anything when the agent is silent); reboot → reboot, done
when the host is back with a new boot id; reset_gpu → `nvidia-smi -r -i N` when the GPU is idle; cordon, drain and
return_to_service → the operator's hook of that name (or `params.hook`) under SSH_HOOKS_DIR on the host. It cannot
verify (that is the agent's smoke test) or request a replacement.
"""

from __future__ import annotations

from datetime import timedelta

from rest_framework.exceptions import ValidationError

from .. import interface as steps
from .. import ssh
from ..choices import SSHActionKind, SSHActionState
from ..models import SSHAction, SSHHost
from ..services.ssh_actions import ssh_action_execute, ssh_action_request, ssh_rebooted

REBOOT_POLL = timedelta(seconds=30)
HOOK_TIMEOUT_S = 200  # below the worker's soft time limit (240 s by default)
# Failures only an operator can clear: retrying them would just fail again.
OPERATOR_CODES = frozenset({ssh.HOST_KEY_CHANGED, ssh.HOST_KEY_UNCONFIRMED, ssh.AUTH_FAILED})
HOOK_KINDS = frozenset({steps.CORDON, steps.DRAIN, steps.RETURN_TO_SERVICE})


class SSHExecutor:
    name = "ssh"
    kinds = frozenset({steps.COLLECT_EVIDENCE, steps.REBOOT, steps.RESET_GPU, *HOOK_KINDS})

    def _request(self, ctx: steps.StepContext) -> tuple[str, dict] | steps.StepOutcome:
        if ctx.kind == steps.COLLECT_EVIDENCE:
            return SSHActionKind.DIAGNOSE, {}
        if ctx.kind == steps.REBOOT:
            return SSHActionKind.REBOOT, {}
        if ctx.kind == steps.RESET_GPU:
            index = ctx.params.get("gpu_index", ctx.facts.get("gpu_index"))
            if index is None:
                return steps.StepOutcome.failed("reset_gpu needs a GPU: the finding names none and the step has no "
                                                "gpu_index")
            return SSHActionKind.GPU_RESET, {"gpu_index": index}
        # The step runs inside the engine's worker task: a hook gets at most HOOK_TIMEOUT_S there.
        timeout = min(int(ctx.params.get("timeout_s", HOOK_TIMEOUT_S)), HOOK_TIMEOUT_S)
        return SSHActionKind.RUN_HOOK, {"name": ctx.params.get("hook") or ctx.kind, "timeout_s": timeout}

    def start(self, ctx: steps.StepContext) -> steps.StepOutcome:
        host = SSHHost.objects.filter(node_id=ctx.node_id).first() if ctx.node_id else None
        if host is None:
            return steps.StepOutcome.waiting("this node has no SSH host registered: register it (SSH hosts) or "
                                             "carry the step out by hand", waiting_on=steps.WAITING_OPERATOR)
        request = self._request(ctx)
        if isinstance(request, steps.StepOutcome):
            return request
        kind, params = request
        if ctx.dry_run:
            return steps.StepOutcome.done(f"dry run: would run ssh {kind} {params or ''} on {host}".strip(),
                                          ssh_host=host.pk)
        try:
            action, _ = ssh_action_request(host=host, kind=kind, params=params, actor=None,
                                           requested_by="remediation", idempotency_key=ctx.idempotency_key,
                                           incident_key=ctx.incident_key)
        except ValidationError as exc:
            return steps.StepOutcome.failed(f"bad step parameters: {exc.detail}")
        if action.state == SSHActionState.QUEUED:  # never ran (also after a crash between record and run)
            action = ssh_action_execute(action_id=action.pk)
        return self._outcome(action)

    def poll(self, ctx: steps.StepContext) -> steps.StepOutcome:
        action = SSHAction.objects.select_related("host").filter(idempotency_key=ctx.idempotency_key).first()
        if action is None:
            return self.start(ctx)
        return self._outcome(action)

    def _outcome(self, action: SSHAction) -> steps.StepOutcome:
        facts = {"ssh_action": action.pk, "ssh_host": action.host_id, "exit_status": action.exit_status}
        if action.state == SSHActionState.RUNNING:
            return steps.StepOutcome.waiting(
                f"ssh {action.kind} #{action.pk} was interrupted (the worker stopped while it ran) and is not run "
                "again: check the host, then complete or fail the step", waiting_on=steps.WAITING_OPERATOR, **facts)
        if action.state == SSHActionState.FAILED:
            if (action.result or {}).get("error") in OPERATOR_CODES:
                return steps.StepOutcome.waiting(action.message, waiting_on=steps.WAITING_OPERATOR, **facts)
            return steps.StepOutcome.failed(action.message, **facts)
        if action.kind == SSHActionKind.REBOOT:
            back, message = ssh_rebooted(action=action)
            if not back:
                return steps.StepOutcome.waiting(f"rebooting: {message}", retry_after=REBOOT_POLL,
                                                 waiting_on=steps.WAITING_EXECUTOR, **facts)
            return steps.StepOutcome.done(message, **facts)
        if action.kind == SSHActionKind.DIAGNOSE:
            return steps.StepOutcome.done(action.message, evidence={"source": "ssh", "ssh_action": action.pk,
                                                                    "summary": action.result.get("summary", {})},
                                          **{steps.EXECUTOR_EVIDENCE: action.result}, **facts)
        return steps.StepOutcome.done(action.message, **facts)
