"""The `webhook` executor: a signed request to the user's own provisioning system, completed by its callback.

For clouds without a built-in executor, a replacement is requested this way (the new node's agent enrols into the
pool and is linked to the incident there); a site can also carry out cordon, drain, return, reboot, GPU reset or a
stack rollback through its own pipeline. The step waits until the receiver calls back done or failed.
"""

from __future__ import annotations

from datetime import timedelta

from fleet.core.api.errors import DomainError
from fleet.inventory.models import Node

from .. import interface as steps
from ..choices import ConfiguredExecutor, ExternalState
from ..models import ExecutorConfig, ExternalRequest
from ..services.executor_configs import executor_config_for
from ..services.external import external_request_record
from ..services.webhook import webhook_deliver

POLL = timedelta(seconds=30)
NODE_FACTS = ("hostname", "instance_id", "instance_type", "provider", "pool", "site", "region", "gpu_index",
              "gpu_serial", "gpu_uuid", "title", "cause", "responsible_party")


class WebhookExecutor:
    name = "webhook"
    kinds = frozenset({steps.REQUEST_REPLACEMENT, steps.CORDON, steps.DRAIN, steps.RETURN_TO_SERVICE, steps.REBOOT,
                       steps.RESET_GPU, steps.ROLLBACK_STACK})

    def start(self, ctx: steps.StepContext) -> steps.StepOutcome:
        node = Node.objects.select_related("pool", "provider", "site").filter(pk=ctx.node_id).first() \
            if ctx.node_id else None
        config = executor_config_for(node=node, executor=ConfiguredExecutor.WEBHOOK)
        if config is None:
            return steps.StepOutcome.waiting("this node's pool has no webhook settings (executor configs)",
                                             waiting_on=steps.WAITING_OPERATOR)
        if ctx.dry_run:
            return steps.StepOutcome.done(f"dry run: would POST a signed {ctx.kind} request to "
                                          f"{config.settings['url']}")
        request = external_request_record(executor=ConfiguredExecutor.WEBHOOK, kind=ctx.kind, node=node,
                                          incident_key=ctx.incident_key, idempotency_key=ctx.idempotency_key)
        return self._advance(ctx, config, request, node)

    def poll(self, ctx: steps.StepContext) -> steps.StepOutcome:
        request = ExternalRequest.objects.filter(idempotency_key=ctx.idempotency_key).first()
        if request is None:
            return self.start(ctx)
        node = request.node
        config = ExecutorConfig.objects.filter(pool_id=request.pool_id, executor=ConfiguredExecutor.WEBHOOK).first()
        if config is None and request.state == ExternalState.PENDING:
            return steps.StepOutcome.waiting("the pool's webhook settings are gone", waiting_on=steps.WAITING_OPERATOR)
        return self._advance(ctx, config, request, node)

    def _advance(self, ctx, config, request: ExternalRequest, node) -> steps.StepOutcome:
        if request.state == ExternalState.PENDING:
            payload = {"kind": ctx.kind, "incident": ctx.incident_key, "params": ctx.params,
                       "node": {"id": getattr(node, "pk", None),
                                **{k: ctx.facts.get(k) for k in NODE_FACTS if ctx.facts.get(k) is not None}}}
            if node is not None:
                payload["node"].update(hostname=node.hostname, instance_id=node.instance_id,
                                       pool=str(node.pool or ""), provider=str(node.provider))
            try:
                request = webhook_deliver(config=config, request=request, payload=payload)
            except DomainError as exc:
                return steps.StepOutcome.waiting(str(exc.detail), waiting_on=steps.WAITING_OPERATOR)
        facts = {"external_request": str(request.public_id)}
        if request.state == ExternalState.DONE:
            return steps.StepOutcome.done(request.message, replacement=request.detail.get("replacement"), **facts)
        if request.state == ExternalState.FAILED:
            return steps.StepOutcome.failed(request.message, **facts)
        waiting_on = steps.WAITING_REPLACEMENT if ctx.kind == steps.REQUEST_REPLACEMENT else steps.WAITING_EXECUTOR
        retry = POLL if request.state == ExternalState.ACCEPTED or request.next_attempt_at is None else \
            max(timedelta(seconds=1), request.next_attempt_at - request.updated_at)
        return steps.StepOutcome.waiting(request.message, retry_after=retry, waiting_on=waiting_on, **facts)
