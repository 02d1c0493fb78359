"""The action channel end to end: a real `fleet-agent run` process (the `agent_node` fixture) against a live
server, driven through the `agent` executor. Evidence comes back with a report; an action the node does not allow
is refused and the step waits for an operator; an agent killed mid-action and restarted reports it interrupted and
never runs it twice."""

import signal
import time

import pytest

from fleet.executors import interface as steps
from fleet.executors.backends.agent import AgentExecutor
from fleet.executors.models import AgentAction
from tests.processes import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def ctx(node_id: int, kind: str, step: int, **params) -> steps.StepContext:
    return steps.StepContext(incident_id=1, incident_key="INC-42", node_id=node_id, step_index=step, attempt=1,
                             kind=kind, params=params, dry_run=False,
                             idempotency_key=steps.idempotency_key("INC-42", step, 1), facts={})


def settle(executor: AgentExecutor, context: steps.StepContext, *, timeout: float = 40.0) -> steps.StepOutcome:
    """Poll like the engine does until the step stops waiting on the executor."""
    def answer():
        outcome = executor.poll(context)
        return outcome if outcome.waiting_on != steps.WAITING_EXECUTOR else None

    return wait_for(answer, timeout=timeout, what=f"{context.kind} to settle", interval=0.5)


def test_the_agent_channel_end_to_end(agent_node):
    executor = AgentExecutor()
    agent = agent_node.start_agent()

    evidence = ctx(agent_node.pk, "collect_evidence", 0)
    assert executor.start(evidence).waiting_on == steps.WAITING_EXECUTOR
    done = settle(executor, evidence)
    assert done.status == "done", done.message
    action = AgentAction.objects.get(idempotency_key=evidence.idempotency_key)
    assert "<driver_version>550.54.15" in action.evidence["nvidia_smi_xml"]
    assert action.exit_status == 0 and action.finished_at is not None

    # Not allowed on this node: refused, reported, and the step waits for an operator.
    verify = ctx(agent_node.pk, "verify", 1)
    executor.start(verify)
    refused = settle(executor, verify)
    assert (refused.status, refused.retry_after, refused.waiting_on) == ("waiting", None, steps.WAITING_OPERATOR)
    assert "refused" in refused.message and "not allowed" in refused.message

    # Killed while a hook runs, restarted: reported interrupted, never run a second time.
    drain = ctx(agent_node.pk, "drain", 2, hook="slow-drain")
    executor.start(drain)
    log = agent_node.tmp / "drain.log"
    wait_for(lambda: log.exists() and log.read_text().count("started") == 1, timeout=40, what="the hook to start")
    agent.send_signal(signal.SIGKILL)
    agent.wait(timeout=10)
    agent_node.start_agent()
    interrupted = settle(executor, drain)
    assert (interrupted.status, interrupted.waiting_on) == ("waiting", steps.WAITING_OPERATOR)
    assert "interrupted" in interrupted.message
    time.sleep(3)  # a few more reports: the server stopped sending it, and the agent would not run it anyway
    assert log.read_text().count("started") == 1
    assert AgentAction.objects.get(idempotency_key=drain.idempotency_key).state == "interrupted"
