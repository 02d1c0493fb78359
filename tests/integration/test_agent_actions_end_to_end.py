"""The action channel end to end: a real `fleet-agent run` process against a live server, driven through the
`agent` executor. Evidence comes back with a report; an action the node does not allow is refused and the step
waits for an operator; an agent killed mid-action and restarted reports it interrupted and never runs it twice."""

import os
import signal
import subprocess
import sys
import time

import pytest

from fleet.executors import interface as steps
from fleet.executors.backends.agent import AgentExecutor
from fleet.executors.models import AgentAction
from fleet.inventory.models import Node
from fleet.telemetry.services.enrollment import enrollment_token_create
from tests.factories import PoolFactory, ProviderFactory, UserFactory
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


@pytest.fixture
def agent_node(live_server, tmp_path):
    """An enrolled node whose real agent allows evidence and hooks, with a stand-in nvidia-smi."""
    operator = UserFactory(username="e2e-op", role="operator")
    provider = ProviderFactory(kind="own", cloud="")
    pool = PoolFactory(provider=provider, delivery_form="bare_metal_owned")
    _, token = enrollment_token_create(actor=operator, name="e2e", provider=provider, pool=pool,
                                       delivery_form="bare_metal_owned", billing_mode="reserved")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "slow-drain").write_text(f"#!/bin/sh\necho started >> {tmp_path / 'drain.log'}\nsleep 20\n")
    (hooks / "slow-drain").chmod(0o755)
    nvidia_smi = tmp_path / "nvidia-smi"
    nvidia_smi.write_text("#!/bin/sh\necho '<nvidia_smi_log><driver_version>550.54.15</driver_version>"
                          "</nvidia_smi_log>'\n")
    nvidia_smi.chmod(0o755)
    conf = tmp_path / "agent.toml"
    conf.write_text("\n".join([
        f'server = "{live_server.url}"', f'state_dir = "{tmp_path / "state"}"', "interval_s = 1",
        'kernel_log = "off"', 'cloud = "none"', 'nvml_events = "off"', "stack_refresh_s = 3600",
        "[actions]", 'allow = ["collect_evidence", "run_hook"]', f'hooks_dir = "{hooks}"',
        f'nvidia_smi = "{nvidia_smi}"', ""]))
    enrolled = subprocess.run([sys.executable, "-m", "fleet_agent", "enroll", "--config", str(conf), "--token",
                               token], capture_output=True, text=True, timeout=60)
    assert enrolled.returncode == 0, enrolled.stdout + enrolled.stderr
    node = Node.objects.get()
    processes = []

    def start():
        log = (tmp_path / f"agent-{len(processes)}.log").open("wb")
        process = subprocess.Popen([sys.executable, "-m", "fleet_agent", "run", "--config", str(conf)],
                                   stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        processes.append(process)
        return process

    node.start_agent = start
    node.tmp = tmp_path
    yield node
    for process in processes:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()


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
    reboot = ctx(agent_node.pk, "reboot", 1)
    executor.start(reboot)
    refused = settle(executor, reboot)
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
