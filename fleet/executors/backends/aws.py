"""The `aws` executor: request_replacement for nodes on EC2 (terminate in the Auto Scaling group, or launch from a
launch template). The replacement's agent enrols into the same pool and is linked to the incident there. Nothing
else: cordon/drain belong to the scheduler's executor, evidence and resets to the agent or SSH."""

from __future__ import annotations

from fleet.inventory.models import Node

from .. import interface as steps
from ..choices import ConfiguredExecutor, ExternalState
from ..services.aws import aws_request_replacement
from ..services.executor_configs import executor_config_for
from ..services.external import external_request_record


class AWSExecutor:
    name = "aws"
    kinds = frozenset({steps.REQUEST_REPLACEMENT})

    def start(self, ctx: steps.StepContext) -> steps.StepOutcome:
        node = Node.objects.select_related("pool").filter(pk=ctx.node_id).first() if ctx.node_id else None
        config = executor_config_for(node=node, executor=ConfiguredExecutor.AWS)
        if config is None:
            return steps.StepOutcome.waiting("this node's pool has no AWS settings (executor configs)",
                                             waiting_on=steps.WAITING_OPERATOR)
        if ctx.dry_run:
            how = "terminate it in its Auto Scaling group" if config.settings["mode"] == "asg" else \
                f"launch from {config.settings.get('launch_template_id')}"
            return steps.StepOutcome.done(f"dry run: would replace {node.instance_id or node}: {how}")
        request = external_request_record(executor=ConfiguredExecutor.AWS, kind=ctx.kind, node=node,
                                          incident_key=ctx.incident_key, idempotency_key=ctx.idempotency_key)
        request = aws_request_replacement(config=config, node=node, request=request)
        if request.state == ExternalState.DONE:
            return steps.StepOutcome.done(request.message, aws=request.detail, external_request=str(request.public_id))
        return steps.StepOutcome.failed(request.message, external_request=str(request.public_id))

    def poll(self, ctx: steps.StepContext) -> steps.StepOutcome:
        return self.start(ctx)
