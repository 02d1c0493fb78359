"""The agent's side of the action channel: nothing runs unless allowed, everything is checked and refusals are
reported, each action runs at most once across restarts, and outcomes ride the next report."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from fleet_agent.actions import ActionRunner, CommandOutcome, Identity
from fleet_agent.config import ConfigError, load_config
from fleet_agent.protocol import action_signature, action_signing_key
from fleet_agent.spool import Spool
from fleet_agent.timeutil import rfc3339
from tests.agents.conftest import build_core

CREDENTIAL = "fn_test-credential"
KEY = action_signing_key(CREDENTIAL)
NODE = 7


def signed(kind: str, params: dict | None = None, *, node_id: int = NODE, ttl: timedelta = timedelta(hours=1),
           key: bytes = KEY, **extra) -> dict:
    action = {"id": str(uuid.uuid4()), "node_id": node_id, "kind": kind, "params": params or {},
              "not_after": rfc3339(datetime.now(UTC) + ttl), "reason": "INC-1"}
    action["signature"] = action_signature(key, action)
    action.update(extra)
    return action


class Commands:
    """Stands in for subprocess: records argv, answers per program name."""

    def __init__(self, answers: dict | None = None):
        self.calls: list[list[str]] = []
        self.answers = answers or {}

    def __call__(self, argv, *, timeout=0, env=None):
        self.calls.append(list(argv))
        for needle, outcome in self.answers.items():
            if needle in " ".join(argv):
                return outcome
        return CommandOutcome(0, "", "")


def runner(spool, *, allow=(), commands=None, boot_id="boot-1", hooks_dir="/nonexistent", results=None):
    return ActionRunner(spool=spool, identity=lambda: Identity(NODE, KEY), allow=list(allow), hooks_dir=hooks_dir,
                        reboot_command=["sudo", "-n", "/usr/bin/systemctl", "reboot"],
                        gpu_reset_command=["sudo", "-n", "/usr/bin/nvidia-smi", "-r", "-i", "{gpu}"],
                        verify=lambda: (True, "PASS: 0 check(s) failed\n"), boot_id=lambda: boot_id,
                        on_result=(lambda: results.append(1)) if results is not None else None,
                        command=commands or Commands())


@pytest.fixture
def spool(tmp_path):
    spool = Spool(tmp_path / "spool.db")
    yield spool
    spool.close()


def drain(agent: ActionRunner) -> None:
    while not agent._queue.empty():
        agent.run_one(agent._queue.get())


def result_of(spool: Spool, action: dict) -> dict:
    [found] = [r for r in spool.action_results_unreported() if r["id"] == action["id"]]
    return found


def test_nothing_is_allowed_by_default_and_refusals_are_reported(spool):
    commands = Commands()
    agent = runner(spool, commands=commands)
    action = signed("reboot")
    assert agent.receive([action]) == 0
    refused = result_of(spool, action)
    assert refused["result"] == "refused" and "not allowed" in refused["message"]
    assert commands.calls == []


@pytest.mark.parametrize("mutate, why", [
    (lambda a: a.update(kind="gpu_reset"), "signature does not match"),              # altered on the way
    (lambda a: a.update(params={"gpu_index": 1}), "signature does not match"),
    (lambda a: a.update(signature="0" * 64), "signature does not match"),
])
def test_tampered_actions_are_refused(spool, mutate, why):
    commands = Commands()
    agent = runner(spool, allow=["reboot", "gpu_reset"], commands=commands)
    action = signed("reboot")
    mutate(action)
    agent.receive([action])
    assert why in result_of(spool, action)["message"]
    assert commands.calls == []


def test_unknown_kind_other_node_bad_params_expired(spool):
    agent = runner(spool, allow=["gpu_reset", "run_hook"])
    unknown = signed("format_disk")
    foreign = signed("gpu_reset", {"gpu_index": 0}, node_id=8)
    bad = signed("gpu_reset", {"gpu_index": "0; rm -rf /"})
    extra = signed("gpu_reset", {"gpu_index": 0, "force": True})
    path = signed("run_hook", {"name": "../../bin/sh"})
    expired = signed("gpu_reset", {"gpu_index": 0}, ttl=timedelta(seconds=-1))
    stranger = signed("reboot", key=action_signing_key("fn_someone-else"))
    assert agent.receive([unknown, foreign, bad, extra, path, expired, stranger]) == 0
    assert "unknown action kind 'format_disk'" in result_of(spool, unknown)["message"]
    assert "for node 8" in result_of(spool, foreign)["message"]
    assert "gpu_index" in result_of(spool, bad)["message"]
    assert "takes no force" in result_of(spool, extra)["message"]
    assert "hook name" in result_of(spool, path)["message"]
    assert result_of(spool, expired)["result"] == "expired"
    assert "signature" in result_of(spool, stranger)["message"]


def test_each_action_runs_once_even_across_restarts(spool, tmp_path):
    commands = Commands()
    agent = runner(spool, allow=["gpu_reset"], commands=commands)
    action = signed("gpu_reset", {"gpu_index": 2})
    assert agent.receive([action]) == 1
    drain(agent)
    assert agent.receive([action]) == 0  # the server sends it again until it hears the outcome
    restarted = runner(Spool(spool.path), allow=["gpu_reset"], commands=commands)
    restarted.recover()
    assert restarted.receive([action]) == 0
    drain(restarted)
    resets = [call for call in commands.calls if "-r" in call]
    assert resets == [["sudo", "-n", "/usr/bin/nvidia-smi", "-r", "-i", "2"]]
    assert result_of(spool, action)["result"] == "done"


def test_a_restart_mid_action_reports_interrupted_and_never_reruns(spool):
    commands = Commands()
    agent = runner(spool, allow=["run_hook", "reboot"], commands=commands)
    hook, reboot, waiting = signed("run_hook", {"name": "drain"}), signed("reboot"), signed("run_hook",
                                                                                            {"name": "drain"})
    agent.receive([hook, reboot, waiting])
    spool.action_start(hook["id"])    # the agent died while these two ran ...
    spool.action_start(reboot["id"])  # ... and the node rebooted meanwhile
    restarted = runner(Spool(spool.path), allow=["run_hook", "reboot"], commands=commands, boot_id="boot-2")
    restarted.recover()
    assert result_of(spool, hook)["result"] == "interrupted"
    assert result_of(spool, reboot)["result"] == "done" and "boot id changed" in result_of(spool, reboot)["message"]
    drain(restarted)  # the one that never started runs now
    assert result_of(spool, waiting)["result"] == "failed"  # (no such hook here)
    assert commands.calls == []


def test_gpu_reset_only_when_idle(spool):
    commands = Commands({"query-compute-apps": CommandOutcome(0, "4242, python\n", "")})
    agent = runner(spool, allow=["gpu_reset"], commands=commands)
    action = signed("gpu_reset", {"gpu_index": 0})
    agent.receive([action])
    drain(agent)
    outcome = result_of(spool, action)
    assert outcome["result"] == "failed" and "busy" in outcome["message"]
    assert not any("-r" in call for call in commands.calls)


def test_hooks_run_from_the_hooks_dir_only(spool, tmp_path):
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "cordon").write_text("#!/bin/sh\necho cordoned $FLEET_INCIDENT\n")
    (hooks / "cordon").chmod(0o755)
    (hooks / "escape").symlink_to("/bin/sh")
    agent = ActionRunner(spool=spool, identity=lambda: Identity(NODE, KEY), allow=["run_hook:cordon",
                                                                                   "run_hook:escape"],
                         hooks_dir=str(hooks), reboot_command=["true"], gpu_reset_command=["true"])
    cordon, escape, other = (signed("run_hook", {"name": "cordon"}), signed("run_hook", {"name": "escape"}),
                             signed("run_hook", {"name": "drain"}))
    agent.receive([cordon, escape, other])
    drain(agent)
    done = result_of(spool, cordon)
    assert (done["result"], done["exit_status"], done["stdout_tail"]) == ("done", 0, "cordoned INC-1\n")
    assert "outside" in result_of(spool, escape)["message"]
    assert "not allowed" in result_of(spool, other)["message"]  # only the hooks named in allow


def test_evidence_and_verify(spool):
    commands = Commands({"nvidia-smi -q -x": CommandOutcome(0, "<nvidia_smi_log/>\n", ""),
                         "journalctl": CommandOutcome(0, "kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=1\nother\n",
                                                      "")})
    agent = runner(spool, allow=["collect_evidence", "verify"], commands=commands)
    evidence, verify = signed("collect_evidence"), signed("verify")
    agent.receive([evidence, verify])
    drain(agent)
    got = result_of(spool, evidence)
    assert got["result"] == "done"
    assert got["evidence"]["nvidia_smi_xml"].startswith("<nvidia_smi_log/>")
    assert got["evidence"]["xid_lines"].startswith("kernel: NVRM: Xid")
    assert result_of(spool, verify)["stdout_tail"].startswith("PASS")


def test_outcomes_ride_the_next_report_once(spool, assert_valid_report):
    results = []
    agent = runner(spool, allow=["reboot"], results=results)
    action = signed("reboot")
    agent.receive([action])
    drain(agent)
    assert results  # the daemon reports at once
    core = build_core(spool)
    report = core.collect()
    assert_valid_report(report)
    [carried] = report["action_results"]
    assert (carried["id"], carried["result"], carried["exit_status"]) == (action["id"], "done", 0)
    assert "action_results" not in core.collect()  # carried by exactly one report
    assert spool.action_results_unreported() == []


def test_config_actions_table_and_environment(tmp_path):
    path = tmp_path / "agent.toml"
    path.write_text('server = "https://fleet.example"\n[actions]\nallow = ["reboot", "run_hook:drain"]\n'
                    'reboot_command = ["sudo", "-n", "/bin/systemctl", "reboot"]\n')
    config = load_config(config_file=str(path), environ={})
    assert config.actions_allow == ["reboot", "run_hook:drain"]
    assert config.actions_reboot_command == ["sudo", "-n", "/bin/systemctl", "reboot"]
    assert config.actions_hooks_dir == "/etc/fleet-agent/hooks"
    from_env = load_config(config_file=str(path), environ={"FLEET_AGENT_ACTIONS_ALLOW": "verify,gpu_reset"})
    assert from_env.actions_allow == ["verify", "gpu_reset"]
    path.write_text('[actions]\nallow = ["rm_rf"]\n')
    with pytest.raises(ConfigError, match="actions_allow"):
        load_config(config_file=str(path), environ={})
