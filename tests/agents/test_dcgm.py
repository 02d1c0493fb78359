"""DCGM active diagnostics on the agent: the parser against recorded ``dcgmi diag -j`` outputs (DCGM 3 and 4
shapes), a fake ``dcgmi`` on PATH replaying them, the ``dcgm_diag`` action and ``fleet-agent verify --level``."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from fleet_agent import cli
from fleet_agent.actions import ActionRunner, Identity
from fleet_agent.dcgm import (
    DiagParseError,
    diagnose,
    drain_inbox,
    inbox_path,
    normalize_status,
    parse_diag,
    run_diag,
)
from fleet_agent.protocol import action_signature, action_signing_key
from fleet_agent.spool import Spool
from fleet_agent.timeutil import rfc3339
from tests.agents import fake_dcgmi
from tests.agents.fake_dcgmi import FIXTURES

GPUS = {i: {"uuid": f"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd", "pci_bus_id": f"00000000:{0x18 + i:02X}:00.0"}
        for i in range(8)}


def _read(name: str) -> str:
    return (FIXTURES / name).read_text()


# -- the parser -------------------------------------------------------------------------------------------------

def test_dcgm3_level2_pass_is_read_with_node_wide_deployment_checks():
    result = parse_diag(_read("dcgm3_r2_pass.json"))
    assert result.passed and result.failures == []
    deployment = [t for t in result.tests if t.category == "Deployment"]
    assert len(deployment) == 9 and all(t.gpu_index is None for t in deployment)
    (memory,) = [t for t in result.tests if t.name == "GPU Memory"]
    assert memory.gpu_index == 0 and memory.status == "pass" and memory.hardware


def test_dcgm3_level3_skip_is_not_a_failure():
    result = parse_diag(_read("dcgm3_r3_pass.json"))
    (eud,) = [t for t in result.tests if t.name == "EUD Test"]
    assert eud.status == "skip"
    assert result.passed
    assert {t.category for t in result.tests} == {"Deployment", "Integration", "Hardware", "Stress"}


def test_dcgm4_gb10_capture_fails_its_software_test_on_persistence_mode():
    result = parse_diag(_read("dcgm4_r1_gb10_software_fail.json"))
    assert (result.dcgm_version, result.driver_version) == ("4.2.3", "580.82.09")
    (failure,) = result.failures
    assert (failure.category, failure.name, failure.gpu_index) == ("Deployment", "software", 0)
    assert "Persistence mode for GPU 0 is disabled" in failure.warnings[0]
    assert not failure.hardware  # a node setting, not the part
    assert not result.passed


def test_dcgm4_level3_names_the_failing_test_and_gpu():
    result = parse_diag(_read("dcgm4_r3_8gpu_memory_fail.json"))
    assert result.dcgm_version == "4.1.1"
    assert len({t.gpu_index for t in result.tests}) == 8
    (failure,) = result.failures
    assert (failure.name, failure.gpu_index, failure.hardware) == ("memory", 5, True)
    assert failure.warnings == ["Found 2 faulty memory elements on GPU 5"]


@pytest.mark.parametrize("text", ["", "Error: Unable to connect to host engine", "{not json",
                                  '{"something": "else"}', "[1, 2]"])
def test_output_that_is_no_diagnostic_document_is_refused(text):
    with pytest.raises(DiagParseError):
        parse_diag(text)


def test_an_unknown_status_word_is_never_a_pass():
    assert normalize_status("Inconclusive") == "unknown" and normalize_status(None) == "unknown"
    doc = {"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
        {"name": "memory", "results": [{"entity_group": "GPU", "entity_id": 0, "status": "Inconclusive"}]}]}]}}
    assert not parse_diag(json.dumps(doc)).passed


def test_a_banner_before_the_document_is_skipped():
    result = parse_diag("Successfully ran diagnostic for group.\n" + _read("dcgm3_r2_pass.json"))
    assert result.passed


def test_a_failure_known_only_from_the_test_summary_is_kept():
    doc = {"DCGM Diagnostic": {"test_categories": [{"category": "Integration", "tests": [
        {"name": "nvlink", "results": [], "test_summary": {"status": "Fail", "warnings": [{"warning": "x"}]}}]}]}}
    (failure,) = parse_diag(json.dumps(doc)).failures
    assert failure.name == "nvlink" and failure.gpu_index is None and failure.warnings == ["x"]


# -- running dcgmi (a fake one on PATH) -------------------------------------------------------------------------

@pytest.fixture
def dcgmi(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    fake_dcgmi.install(bin_dir, {1: ("dcgm3_r2_pass.json", 0), 3: ("dcgm4_r3_8gpu_memory_fail.json", 226)})
    fake_dcgmi.on_path(monkeypatch, bin_dir)
    return bin_dir


def test_a_failing_level3_run_becomes_one_critical_diag_event_naming_test_and_gpu(dcgmi):
    events = []
    run = diagnose(3, gpus_by_index=GPUS, sink=events.append)
    assert fake_dcgmi.calls(dcgmi) == ["diag -r 3 -j"]
    assert run.outcome == "fail" and run.exit_status == 226 and "memory (GPU 5)" in run.message
    (event,) = events
    assert event["kind"] == "diag" and event["code"] == 3 and event["severity"] == "critical"
    assert event["gpu_uuid"] == GPUS[5]["uuid"]
    summary = json.loads(event["raw"])
    assert summary["outcome"] == "fail" and summary["level"] == 3
    (failure,) = summary["failures"]
    assert failure == {"category": "Hardware", "test": "memory", "gpu_index": 5, "gpu_uuid": GPUS[5]["uuid"],
                       "pci_bus_id": GPUS[5]["pci_bus_id"], "hardware": True,
                       "warning": "Found 2 faulty memory elements on GPU 5"}
    assert len(event["raw"]) <= 8192 and len(event["message"]) <= 4096


def test_a_passing_run_is_an_info_event(dcgmi):
    events = []
    run = diagnose(1, gpus_by_index=GPUS, sink=events.append)
    assert run.outcome == "pass" and "passed" in run.message
    assert events[0]["severity"] == "info" and json.loads(events[0]["raw"])["failures"] == []


def test_no_verdict_is_an_error_that_says_why(dcgmi):
    run = run_diag(2)
    assert run.outcome == "error" and "Host engine" in run.message and "nv-hostengine" in run.message


def test_without_dcgm_nothing_runs_and_nothing_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    events = []
    run = diagnose(1, sink=events.append)
    assert run.outcome == "unavailable" and "not installed" in run.message and events == []


# -- the dcgm_diag action ---------------------------------------------------------------------------------------

KEY = action_signing_key("fn_test-credential")


def _signed(params: dict) -> dict:
    action = {"id": str(uuid.uuid4()), "node_id": 7, "kind": "dcgm_diag", "params": params,
              "not_after": rfc3339(datetime.now(UTC) + timedelta(hours=1)), "reason": "INC-1"}
    action["signature"] = action_signature(KEY, action)
    return action


@pytest.fixture
def spool(tmp_path):
    spool = Spool(tmp_path / "spool.db")
    yield spool
    spool.close()


def _runner(spool, events, allow=("dcgm_diag",)):
    return ActionRunner(spool=spool, identity=lambda: Identity(7, KEY), allow=list(allow), hooks_dir="/nonexistent",
                        reboot_command=["true"], gpu_reset_command=["true"],
                        diagnose=lambda level: diagnose(level, gpus_by_index=GPUS, sink=events.append))


def _result(spool, action):
    [found] = [r for r in spool.action_results_unreported() if r["id"] == action["id"]]
    return found


def test_dcgm_diag_action_fails_on_a_failed_test_and_carries_the_json(spool, dcgmi):
    events = []
    agent = _runner(spool, events)
    action = _signed({"level": 3})
    assert agent.receive([action]) == 1
    agent.run_one(agent._queue.get())
    result = _result(spool, action)
    assert result["result"] == "failed" and result["exit_status"] == 226 and "memory (GPU 5)" in result["message"]
    assert result["evidence"]["dcgm_diag_outcome"] == "fail" and result["evidence"]["dcgm_diag_level"] == "3"
    assert json.loads(result["evidence"]["dcgm_diag_summary"])["failures"][0]["test"] == "memory"
    assert '"DCGM Diagnostic"' in result["evidence"]["dcgm_diag_json"]
    assert [e["kind"] for e in events] == ["diag"]


def test_dcgm_diag_action_without_dcgm_is_done_and_says_unavailable(spool, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    agent = _runner(spool, [])
    action = _signed({"level": 1})
    agent.receive([action])
    agent.run_one(agent._queue.get())
    result = _result(spool, action)
    assert result["result"] == "done" and result["evidence"]["dcgm_diag_outcome"] == "unavailable"


@pytest.mark.parametrize("params", [{"level": 4}, {"level": "2"}, {"level": True}, {}, {"level": 1, "x": 1}])
def test_dcgm_diag_action_with_bad_parameters_is_refused(spool, params, dcgmi):
    agent = _runner(spool, [])
    action = _signed(params)
    assert agent.receive([action]) == 0
    assert _result(spool, action)["result"] == "refused"
    assert fake_dcgmi.calls(dcgmi) == []


def test_dcgm_diag_action_not_allowed_is_refused(spool, dcgmi):
    agent = _runner(spool, [], allow=("verify",))
    action = _signed({"level": 1})
    assert agent.receive([action]) == 0
    assert "not allowed" in _result(spool, action)["message"]


# -- fleet-agent verify --level N -------------------------------------------------------------------------------

def test_verify_level_runs_the_diagnostic_and_leaves_its_event_for_the_agent(tmp_path, dcgmi, capsys, sim_nvml,
                                                                            monkeypatch):
    from fleet_agent import verify

    original = verify.NvmlAdapter

    class Simulated(original):
        def __init__(self, module=None, **kwargs):
            super().__init__(sim_nvml, **kwargs)

    monkeypatch.setattr(verify, "NvmlAdapter", Simulated)
    code = cli.main(["verify", "--state-dir", str(tmp_path / "state"), "--kernel-log", "off", "--level", "3"])
    out = capsys.readouterr().out
    assert code != 0 and "dcgm diag -r 3" in out and "FAIL" in out and "memory (GPU 5)" in out
    (event,) = drain_inbox(inbox_path(tmp_path / "state"))
    assert event["kind"] == "diag" and event["code"] == 3
    assert event["gpu_uuid"] == sim_nvml.gpus[5].uuid  # DCGM's GPU 5 is NVML index 5 of this node
    assert drain_inbox(inbox_path(tmp_path / "state")) == []  # taken once


def test_the_running_agent_reports_what_verify_left_in_the_inbox(control_plane, tmp_path, sim_nvml, dcgmi):
    from fleet_agent.client import ControlPlaneClient
    from fleet_agent.credentials import credential_path
    from fleet_agent.daemon import Daemon
    from fleet_agent.dcgm import append_inbox
    from fleet_agent.enroll import enroll
    from tests.agents.test_daemon import _config, _wait_for, running
    from tests.agents.test_sender import FACTS

    enroll(ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=credential_path(tmp_path))
    daemon = Daemon(_config(tmp_path, interval_s="60", notice_poll_s="0.5"), nvml_module=sim_nvml)
    with running(daemon):
        assert _wait_for(lambda: control_plane.sequences()), "no first report"
        diagnose(3, gpus_by_index=GPUS, sink=lambda event: append_inbox(inbox_path(tmp_path), event))
        assert _wait_for(lambda: any(e["kind"] == "diag" for r in control_plane.reports() for e in r["events"]),
                         timeout=10)
    (event,) = [e for r in control_plane.reports() for e in r["events"] if e["kind"] == "diag"]
    assert event["code"] == 3 and event["severity"] == "critical"
    assert drain_inbox(inbox_path(tmp_path)) == []
