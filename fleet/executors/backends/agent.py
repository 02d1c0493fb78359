"""The `agent` executor: remediation steps carried out by the node's own agent over the action channel.

collect_evidence → the agent's evidence (nvidia-smi -q -x, kernel log, Xid lines); verify → its smoke test;
reset_gpu → `nvidia-smi -r -i N` when the GPU is idle; reboot → done when the node reports a new boot id;
cordon, drain and return_to_service → the hook of that name (or `params.hook`) in /etc/fleet-agent/hooks/, the
way into a site's own scheduler; run_diagnostics → `dcgmi diag -r LEVEL -j` on the node (or, with `target:
replacement`, on the replacement once it enrolled): done when every test passed, failed when one failed (the
workflow's on_failure then stops or escalates), done with "not installed" where the node has no DCGM unless the
step says `require_dcgm`. The node runs only what its config allows: a refusal waits for an operator. It
cannot request a replacement (the node is the thing being replaced).
"""

from __future__ import annotations

from datetime import timedelta

from rest_framework.exceptions import ValidationError

from fleet.inventory.models import Node

from .. import interface as steps
from ..choices import AgentActionKind, AgentActionState
from ..models import AgentAction
from ..services.agent_actions import agent_action_request, agent_rebooted

POLL = timedelta(seconds=15)
HOOK_KINDS = frozenset({steps.CORDON, steps.DRAIN, steps.RETURN_TO_SERVICE})
KINDS = {steps.COLLECT_EVIDENCE: AgentActionKind.COLLECT_EVIDENCE, steps.VERIFY: AgentActionKind.VERIFY,
         steps.RESET_GPU: AgentActionKind.GPU_RESET, steps.REBOOT: AgentActionKind.REBOOT,
         steps.RUN_DIAGNOSTICS: AgentActionKind.DCGM_DIAG}
# The longest a diagnostic may take to be picked up and finish (level 3 on eight GPUs runs 30-45 minutes).
DIAG_TTL_S = {1: 3600, 2: 2 * 3600, 3: 4 * 3600}


class AgentExecutor:
    name = "agent"
    kinds = frozenset({*KINDS, *HOOK_KINDS})

    def _request(self, ctx: steps.StepContext) -> tuple[str, dict] | steps.StepOutcome:
        if ctx.kind in HOOK_KINDS:
            return AgentActionKind.RUN_HOOK, {"name": ctx.params.get("hook") or ctx.kind}
        if ctx.kind == steps.RESET_GPU:
            index = ctx.params.get("gpu_index", ctx.facts.get("gpu_index"))
            if index is None:
                return steps.StepOutcome.failed("reset_gpu needs a GPU: the finding names none and the step has no "
                                                "gpu_index")
            return AgentActionKind.GPU_RESET, {"gpu_index": index}
        if ctx.kind == steps.RUN_DIAGNOSTICS:
            return AgentActionKind.DCGM_DIAG, {"level": ctx.params.get("level", 1)}
        return KINDS[ctx.kind], {}

    @staticmethod
    def _node_id(ctx: steps.StepContext) -> int | None | steps.StepOutcome:
        if ctx.kind == steps.RUN_DIAGNOSTICS and ctx.params.get("target") == "replacement":
            replacement = ctx.facts.get("replacement_node_id")
            if replacement is None:
                return steps.StepOutcome.waiting("waiting for the replacement node to enrol into the pool",
                                                 retry_after=POLL, waiting_on=steps.WAITING_REPLACEMENT)
            return replacement
        return ctx.node_id

    def start(self, ctx: steps.StepContext) -> steps.StepOutcome:
        node_id = self._node_id(ctx)
        if isinstance(node_id, steps.StepOutcome):
            return node_id
        node = Node.objects.filter(pk=node_id).first() if node_id else None
        if node is None:
            return steps.StepOutcome.failed("the agent executor needs a node")
        request = self._request(ctx)
        if isinstance(request, steps.StepOutcome):
            return request
        kind, params = request
        if ctx.dry_run:
            return steps.StepOutcome.done(f"dry run: would ask {node}'s agent to run {kind} {params or ''}".strip())
        try:
            default_ttl = DIAG_TTL_S.get(ctx.params.get("level", 1), 3600) if ctx.kind == steps.RUN_DIAGNOSTICS \
                else 3600
            ttl = timedelta(seconds=int(ctx.params.get("ttl_s", default_ttl)))
            action, _ = agent_action_request(node=node, kind=kind, params=params, actor=None,
                                             requested_by="remediation", idempotency_key=ctx.idempotency_key,
                                             incident_key=ctx.incident_key, ttl=ttl)
        except (ValidationError, ValueError, TypeError) as exc:
            return steps.StepOutcome.failed(f"bad step parameters: {getattr(exc, 'detail', exc)}")
        return self._outcome(action, ctx)

    def poll(self, ctx: steps.StepContext) -> steps.StepOutcome:
        action = AgentAction.objects.filter(idempotency_key=ctx.idempotency_key).first()
        if action is None:
            return self.start(ctx)
        return self._outcome(action, ctx)

    def _outcome(self, action: AgentAction, ctx: steps.StepContext | None = None) -> steps.StepOutcome:
        facts = {"agent_action": str(action.public_id), "exit_status": action.exit_status}
        state = action.state
        if state == AgentActionState.PENDING:
            return steps.StepOutcome.waiting(f"{action.kind} waits for the node's next report",
                                             retry_after=POLL, waiting_on=steps.WAITING_EXECUTOR, **facts)
        if state == AgentActionState.DELIVERED:
            return steps.StepOutcome.waiting(f"{action.kind} handed to the node's agent ({action.deliveries} "
                                             "time(s)); waiting for its outcome", retry_after=POLL,
                                             waiting_on=steps.WAITING_EXECUTOR, **facts)
        detail = "; ".join(part for part in (action.message, action.stderr_tail[-300:].strip()) if part)
        if state in (AgentActionState.REFUSED, AgentActionState.INTERRUPTED, AgentActionState.CANCELLED):
            return steps.StepOutcome.waiting(f"the node's agent {state} {action.kind}: {detail}",
                                             waiting_on=steps.WAITING_OPERATOR, **facts)
        if action.kind == AgentActionKind.DCGM_DIAG and state in (AgentActionState.DONE, AgentActionState.FAILED):
            return self._diag_outcome(action, ctx, facts)
        if state in (AgentActionState.FAILED, AgentActionState.EXPIRED):
            return steps.StepOutcome.failed(f"{action.kind} {state} on the node: {detail}", **facts)
        if action.kind == AgentActionKind.REBOOT and not agent_rebooted(action=action):
            return steps.StepOutcome.waiting("reboot requested; waiting for the node to report from its new boot",
                                             retry_after=POLL, waiting_on=steps.WAITING_EXECUTOR, **facts)
        if action.kind == AgentActionKind.COLLECT_EVIDENCE:
            collected = {"source": "agent", "agent_action": str(action.public_id), "node": action.node_id,
                         "collected_at": action.finished_at.isoformat() if action.finished_at else None,
                         "message": action.message, "sections": action.evidence or {}}
            return steps.StepOutcome.done(action.message, evidence={
                "source": "agent", "agent_action": str(action.public_id), "sections": sorted(action.evidence or {})},
                **{steps.EXECUTOR_EVIDENCE: collected}, **facts)
        return steps.StepOutcome.done(action.message or f"{action.kind} done", **facts)

    @staticmethod
    def _diag_outcome(action: AgentAction, ctx: steps.StepContext | None, facts: dict) -> steps.StepOutcome:
        """The gate: passed, failed (a test failed, or no verdict), or no DCGM on the node."""
        evidence = action.evidence or {}
        outcome = evidence.get("dcgm_diag_outcome")
        facts = {**facts, "dcgm_outcome": outcome, "level": action.params.get("level")}
        summary = evidence.get("dcgm_diag_summary")
        if isinstance(summary, str) and len(summary) < 16384:
            facts["dcgm_summary"] = summary
        if outcome == "unavailable":
            if ctx is not None and ctx.params.get("require_dcgm"):
                return steps.StepOutcome.failed(f"the step requires DCGM, and the node has none: {action.message}",
                                                **facts)
            return steps.StepOutcome.done(f"no gate: {action.message}", skipped=True, **facts)
        if outcome != "pass" or action.state != AgentActionState.DONE:  # "done" without a pass is not a pass
            return steps.StepOutcome.failed(f"the diagnostic did not pass: {action.message or outcome}", **facts)
        return steps.StepOutcome.done(action.message, **facts)
