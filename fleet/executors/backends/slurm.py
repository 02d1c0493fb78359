"""The `slurm` executor: cordon, drain and return a node in the pool's Slurm cluster.

cordon → DRAIN with the reason `fleet: <incident> <title>` (no new jobs; running ones go on); drain → the same, then
"done" only once Slurm reports the node drained (no job left), polled; return_to_service → RESUME, read back. The
commands are idempotent in Slurm itself (draining a drained node only renews its reason). It cannot reset a GPU,
reboot, collect evidence or verify: pair it with the agent or SSH executor for those.
"""

from __future__ import annotations

from datetime import timedelta

from fleet.inventory.models import Node

from .. import interface as steps
from ..choices import ConfiguredExecutor
from ..services.executor_configs import executor_config_for, node_name
from ..services.slurm import SlurmError, slurm_drain, slurm_jobs_on, slurm_node, slurm_resume

DRAIN_POLL = timedelta(seconds=30)


class SlurmExecutor:
    name = "slurm"
    kinds = frozenset({steps.CORDON, steps.DRAIN, steps.RETURN_TO_SERVICE})

    def start(self, ctx: steps.StepContext) -> steps.StepOutcome:
        node = Node.objects.filter(pk=ctx.node_id).first() if ctx.node_id else None
        config = executor_config_for(node=node, executor=ConfiguredExecutor.SLURM)
        if config is None:
            return steps.StepOutcome.waiting("this node's pool has no Slurm settings (executor configs)",
                                             waiting_on=steps.WAITING_OPERATOR)
        name = node_name(node, config)
        reason = " ".join(part for part in ("fleet:", ctx.incident_key, str(ctx.facts.get("title") or "")) if part)
        if ctx.dry_run:
            command = "State=RESUME" if ctx.kind == steps.RETURN_TO_SERVICE else f'State=DRAIN Reason="{reason}"'
            return steps.StepOutcome.done(f"dry run: would run scontrol update NodeName={name} {command}",
                                          slurm_node=name)
        try:
            if ctx.kind == steps.RETURN_TO_SERVICE:
                state = slurm_resume(config, name)
                if state.draining_or_drained:
                    return steps.StepOutcome.failed(f"Slurm still shows {name} as {state.label} after RESUME",
                                                    slurm_node=name, slurm_state=state.label)
                return steps.StepOutcome.done(f"{name} resumed in Slurm ({state.label})", slurm_node=name,
                                              slurm_state=state.label)
            current = slurm_node(config, name)
            if not current.draining_or_drained:  # drained already (by anyone): its reason is left alone
                current = slurm_drain(config, name, reason)
            return self._drain_outcome(ctx, config, name, current)
        except SlurmError as exc:
            return steps.StepOutcome.failed(str(exc), slurm_node=name)

    def poll(self, ctx: steps.StepContext) -> steps.StepOutcome:
        node = Node.objects.filter(pk=ctx.node_id).first() if ctx.node_id else None
        config = executor_config_for(node=node, executor=ConfiguredExecutor.SLURM)
        if config is None or ctx.kind != steps.DRAIN:
            return self.start(ctx)
        name = node_name(node, config)
        try:
            return self._drain_outcome(ctx, config, name, slurm_node(config, name))
        except SlurmError as exc:
            return steps.StepOutcome.failed(str(exc), slurm_node=name)

    def _drain_outcome(self, ctx, config, name, state) -> steps.StepOutcome:
        facts = {"slurm_node": name, "slurm_state": state.label, "slurm_reason": state.reason}
        if not state.draining_or_drained:
            return steps.StepOutcome.failed(f"Slurm does not show {name} draining ({state.label})", **facts)
        if ctx.kind == steps.CORDON or state.drained:
            verb = "drained" if state.drained else "draining (no new jobs)"
            return steps.StepOutcome.done(f"{name} {verb} in Slurm ({state.label})", **facts)
        jobs = slurm_jobs_on(config, name)
        return steps.StepOutcome.waiting(f"{name} is draining ({state.label}); {len(jobs)} job(s) still on it",
                                         retry_after=DRAIN_POLL, waiting_on=steps.WAITING_EXECUTOR, jobs=jobs[:50],
                                         **facts)
