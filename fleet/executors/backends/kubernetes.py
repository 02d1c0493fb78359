"""The `kubernetes` executor: cordon + taint, drain by evictions that respect PodDisruptionBudgets, and return,
for nodes that are Kubernetes nodes (the node's name in the cluster: its `kubernetes-node` label, else its short
host name). It cannot reboot, reset GPUs or collect evidence: pair it with the agent or SSH executor."""

from __future__ import annotations

from datetime import timedelta

from fleet.inventory.models import Node

from .. import interface as steps
from ..choices import ConfiguredExecutor
from ..services.executor_configs import executor_config_for, node_name
from ..services.kubernetes import KubernetesError, k8s_cordon, k8s_drain, k8s_uncordon, taint_value


class KubernetesExecutor:
    name = "kubernetes"
    kinds = frozenset({steps.CORDON, steps.DRAIN, steps.RETURN_TO_SERVICE})

    def start(self, ctx: steps.StepContext) -> steps.StepOutcome:
        node = Node.objects.filter(pk=ctx.node_id).first() if ctx.node_id else None
        config = executor_config_for(node=node, executor=ConfiguredExecutor.KUBERNETES)
        if config is None:
            return steps.StepOutcome.waiting("this node's pool has no Kubernetes settings (executor configs)",
                                             waiting_on=steps.WAITING_OPERATOR)
        name = node_name(node, config)
        cause = str(ctx.facts.get("title") or ctx.facts.get("cause") or ctx.incident_key)
        taint = f"{config.settings['taint_key']}={taint_value(cause)}:NoSchedule"
        if ctx.dry_run:
            verb = {steps.CORDON: f"cordon {name} and taint it {taint}", steps.DRAIN: f"cordon, taint and drain {name}",
                    steps.RETURN_TO_SERVICE: f"uncordon {name} and remove its taint"}[ctx.kind]
            return steps.StepOutcome.done(f"dry run: would {verb}", kubernetes_node=name)
        try:
            if ctx.kind == steps.CORDON:
                k8s_cordon(config, name, cause)
                return steps.StepOutcome.done(f"{name} cordoned and tainted {taint}", kubernetes_node=name)
            if ctx.kind == steps.RETURN_TO_SERVICE:
                k8s_uncordon(config, name)
                return steps.StepOutcome.done(f"{name} uncordoned, taint {config.settings['taint_key']} removed",
                                              kubernetes_node=name)
            progress = k8s_drain(config, name, cause)
        except KubernetesError as exc:
            return steps.StepOutcome.failed(str(exc), kubernetes_node=name)
        facts = {"kubernetes_node": name, "evicted": progress.evicted, "blocked_by_pdb": progress.blocked,
                 "remaining": progress.remaining, "left_alone": progress.ignored}
        if progress.done:
            return steps.StepOutcome.done(f"{name} drained ({len(progress.ignored)} DaemonSet/static pod(s) stay)",
                                          **facts)
        blocked = f"; {len(progress.blocked)} wait for their PodDisruptionBudget" if progress.blocked else ""
        return steps.StepOutcome.waiting(
            f"draining {name}: {len(progress.remaining)} pod(s) left{blocked}", waiting_on=steps.WAITING_EXECUTOR,
            retry_after=timedelta(seconds=config.settings.get("eviction_retry_s", 10)), **facts)

    def poll(self, ctx: steps.StepContext) -> steps.StepOutcome:
        return self.start(ctx)  # every call moves the drain on: evictions are idempotent in the API server
