"""Done-when: the remediation workflows run end to end with each executor, against the real thing — Slurm
(slurmctld + slurmd) and SSH (sshd) for an owned bare-metal node, AWS (moto in server mode) for a cloud node, and
the agent channel with a real `fleet-agent run` process. The engine runs each step the way a worker does
(`step_execute`, with the real clock); an operator completes only the steps no configured executor can do."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.executors.models import AgentAction, ExternalRequest, SSHAction
from fleet.executors.services import ssh_actions
from fleet.executors.services.executor_configs import executor_config_save
from fleet.executors.services.ssh_hosts import ssh_host_create, ssh_host_pin, ssh_key_import
from fleet.health.models import Finding, Rule
from fleet.health.services.evaluation import evaluate
from fleet.remediation.choices import StepStatus
from fleet.remediation.models import EvidenceBundle, Incident, StepRun, TimelineEntry
from fleet.remediation.services.actions import incident_approve, incident_step_complete
from fleet.remediation.services.engine import current_run, step_execute
from tests.factories import UserFactory
from tests.processes import wait_for
from tests.remediation.helpers import fault_and_intake, node_in, pool_for, reboot, report

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def drive(incident: Incident, operator, *, on_step=None, timeout: float = 120.0) -> Incident:
    """Run the incident to its end like a worker (polling executors when they ask) and an operator (approving,
    completing what waits for a person). `on_step(run)` plays the world's part (a job ends, a host comes back)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        incident.refresh_from_db()
        if not incident.is_open:
            return incident
        run = current_run(incident)
        now = timezone.now()
        if on_step is not None:
            on_step(run)
            run.refresh_from_db()
        if run.status == StepStatus.AWAITING_APPROVAL:
            incident_approve(incident_id=incident.pk, step_index=run.step_index, actor=operator, now=now)
        elif run.status == StepStatus.PENDING:
            step_execute(incident_id=incident.pk, step_index=run.step_index, attempt=run.attempt, now=now)
        elif run.status == StepStatus.WAITING and not run.executor_done and run.next_poll_at is None:
            incident_step_complete(incident_id=incident.pk, step_index=run.step_index, actor=operator,
                                   note=f"{run.kind} done by hand", now=now)
        elif run.status == StepStatus.WAITING:
            StepRun.objects.filter(pk=run.pk).update(next_poll_at=now)
            step_execute(incident_id=incident.pk, step_index=run.step_index, attempt=run.attempt, now=now)
            time.sleep(0.3)
        else:
            raise AssertionError(f"unexpected step state {run.status}: {run.message}")
    raise AssertionError(f"{incident.key} did not finish: {incident.state} {incident.state_reason}")


def healthy_again(node) -> None:
    """What a good reboot leaves: the Xid finding resolved an hour ago, a fresh report now."""
    reboot(node, at=timezone.now() - timedelta(hours=1))
    report(node, at=timezone.now())


def executors_by_kind(incident: Incident) -> dict[str, str]:
    return {run.kind: run.executor for run in StepRun.objects.filter(incident=incident, status=StepStatus.DONE)}


def test_owned_reboot_with_slurm_and_ssh(slurm, sshd, seeded_remediation, tmp_path, monkeypatch):
    admin = UserFactory(role="admin", username="e2e-admin")
    pool = pool_for("bare_metal_owned", executors=["slurm", "ssh"])
    executor_config_save(actor=admin, pool=pool, executor="slurm",
                         settings={"controller": "local", "slurm_conf": str(slurm.conf)})
    node = node_in(pool, hostname=slurm.node)
    key = ssh_key_import(actor=admin, name="e2e", private_key=sshd.user_private_key)
    host = ssh_host_create(actor=admin, address="127.0.0.1", port=sshd.port, username=sshd.user, key=key,
                           node=node, scan=False)
    ssh_host_pin(host=host, actor=admin, public_key=sshd.host_public_key, source="test")
    boot_id = tmp_path / "boot_id"
    boot_id.write_text("11111111-1111-4111-8111-111111111111\n")
    monkeypatch.setattr(ssh_actions, "BOOT_ID_COMMAND", f"cat {boot_id}")
    sshd.fake_command("systemctl", f"echo 22222222-2222-4222-8222-222222222222 > {boot_id}\n")
    # Long enough to outlive any slow machine's way to the drain step; the world ends it once the drain waits on it.
    job = slurm.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 300").strip()
    wait_for(lambda: slurm.run("squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING", timeout=30,
             what="the job to run")

    fault_and_intake([node])
    incident = Incident.objects.get(node=node)
    assert incident.workflow.slug == "owned-reboot"
    seen = {}

    def world(run):
        if run.kind == "drain" and run.status == StepStatus.WAITING and "drain_waited_for" not in seen:
            seen["drain_waited_for"] = run.output.get("jobs")
            seen["reason"] = run.output.get("slurm_reason")
            slurm.run("scancel", job)  # the job ends; the drain's next poll finds the node idle
        if run.kind == "verify" and "healthy" not in seen:
            seen["healthy"] = healthy_again(node)

    incident = drive(incident, UserFactory(role="operator", username="e2e-op"), on_step=world)
    assert incident.state == "resolved", incident.state_reason
    assert executors_by_kind(incident) == {"cordon": "slurm", "drain": "slurm", "collect_evidence": "ssh",
                                           "reboot": "ssh", "run_diagnostics": "manual", "verify": "manual",
                                           "return_to_service": "slurm"}
    assert seen["drain_waited_for"] == [job] and seen["reason"].startswith(f"fleet: {incident.key}")
    assert "DRAIN" not in slurm.state()  # returned to service in Slurm
    remote = EvidenceBundle.objects.get(incident=incident, source="ssh")
    assert len(remote.bundle["summary"]["boot_id"]) == 36 and remote.bundle["sections"]["uptime"]["available"]
    assert EvidenceBundle.objects.filter(incident=incident, source="control_plane").exists()
    assert [a.kind for a in SSHAction.objects.order_by("pk")] == ["diagnose", "reboot"]
    done = list(TimelineEntry.objects.filter(incident=incident, kind="step_done").values_list("step_kind", flat=True))
    assert done == ["cordon", "drain", "collect_evidence", "reboot", "run_diagnostics", "verify", "return_to_service"]


def test_cloud_replace_with_aws(fleet_on_aws, seeded_remediation):
    pool = fleet_on_aws["pool"]
    pool.provider.kind, pool.provider.cloud = "cloud", "aws"
    pool.provider.save()
    pool.delivery_form = "cloud_dedicated"
    pool.save()
    from fleet.remediation.models import PoolRemediationSettings

    PoolRemediationSettings.objects.filter(pool=pool).update(executors=["aws"], verify_quiet_period_s=0)
    executor_config_save(actor=UserFactory(role="admin", username="aws-e2e"), pool=pool, executor="aws",
                         secret=fleet_on_aws["secret"],
                         settings={"region": "us-east-1", "endpoint_url": fleet_on_aws["endpoint"],
                                   "access_key_id": fleet_on_aws["key_id"], "mode": "asg"})
    before = fleet_on_aws["members"]()
    node = node_in(pool, instance_id=before[0])
    fault_and_intake([node])
    incident = Incident.objects.get(node=node)
    assert incident.workflow.slug == "cloud-replace"

    def world(run):
        if run.kind == "verify" and run.status == StepStatus.WAITING and not incident.replacement_node_id:
            replacement = node_in(pool, instance_id=fleet_on_aws["members"]()[-1], hostname="replacement-1")
            from fleet.remediation.services.replacement import replacement_link

            replacement_link(node_id=replacement.pk)
            healthy_again(replacement)

    incident = drive(incident, UserFactory(role="operator", username="aws-op"), on_step=world)
    assert incident.state == "resolved", incident.state_reason
    assert executors_by_kind(incident)["request_replacement"] == "aws"
    assert fleet_on_aws["state"](before[0]) in ("shutting-down", "terminated")
    assert before[0] not in fleet_on_aws["members"]() and len(fleet_on_aws["members"]()) == 2
    assert ExternalRequest.objects.get().detail["asg"]
    assert Incident.objects.get(pk=incident.pk).replacement_node.hostname == "replacement-1"


def test_agent_channel_with_a_real_agent(agent_node, seeded_remediation):
    """The real agent allows evidence, reboot and its hooks, not verify nor DCGM diagnostics: those are refused and
    wait for an operator, everything else runs on the node through the reports channel."""
    from fleet.remediation.models import PoolRemediationSettings
    from tests.factories import GPUFactory
    from tests.health.factories import bus_id

    node = agent_node
    PoolRemediationSettings.objects.filter(pool=node.pool).update(executors=["agent"], verify_quiet_period_s=0)
    for index in range(4):
        GPUFactory(node=node, index=index, pci_bus_id=bus_id(index))
    agent = node.start_agent()
    from fleet.telemetry.models import NodeStatus

    wait_for(lambda: NodeStatus.objects.filter(node=node).exists(), timeout=30, what="the agent's first report")
    decided = fault_and_intake([node], at=timezone.now())
    assert decided["processed"] == 1
    incident = Incident.objects.get(node=node)
    assert incident.workflow.slug == "owned-reboot"
    seen = {}

    def world(run):
        if run.kind == "verify" and run.status == StepStatus.WAITING and "refused" in run.message:
            seen["verify"] = run.message
        elif run.kind == "verify" and run.waiting_on == "verification":
            # The node rebooted for real (its agent reported the new boot id): health sees the Xid cleared.
            Rule.objects.update(clear_hold_s=0)
            evaluate(node_ids=[node.pk], now=timezone.now())

    incident = drive(incident, UserFactory(role="operator", username="agent-op"), on_step=world, timeout=180)
    assert agent.poll() is None, "the agent kept running"
    assert incident.state == "resolved", incident.state_reason
    assert executors_by_kind(incident) == {kind: "agent" for kind in (
        "cordon", "drain", "collect_evidence", "reboot", "run_diagnostics", "verify", "return_to_service")}
    assert "not allowed" in seen["verify"]
    actions = {a.kind if a.kind != "run_hook" else a.params["name"]: a.state
               for a in AgentAction.objects.filter(node=node)}
    assert actions == {"cordon": "done", "drain": "done", "collect_evidence": "done", "reboot": "done",
                       "dcgm_diag": "refused", "verify": "refused", "return_to_service": "done"}
    assert (node.tmp / "hooks.log").read_text().split() == ["cordon", "drain", "return_to_service"]
    agent_bundle = EvidenceBundle.objects.get(incident=incident, source="agent")
    assert "nvidia_smi_xml" in agent_bundle.bundle["sections"]
    assert Finding.objects.filter(node=node, state="open").count() == 0
