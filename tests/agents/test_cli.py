"""The ``fleet-agent`` command line, run as a subprocess like an operator would."""

from __future__ import annotations

import json
import stat
import subprocess
import sys

from fleet_agent.spool import Spool


def fleet_agent(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fleet_agent", *args], capture_output=True, text=True, timeout=timeout
    )


def test_collect_once_on_a_machine_without_gpu(tmp_path, assert_valid_report):
    state_dir = tmp_path / "state"
    done = fleet_agent(
        "collect",
        "--once",
        "--json",
        "--state-dir",
        str(state_dir),
        "--cloud",
        "none",
        "--expected-gpus",
        "8",
        "--window",
        "0.1",
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert_valid_report(report)
    visibility = report["visibility"]
    assert visibility["nvml"] == "library_not_found" and visibility["expected_gpu_count"] == 8
    assert "libnvidia-ml.so.1 not found" in visibility["message"]
    assert report["system"]["cpu_count"] >= 1 and report["system"]["cpu_busy_pct"] is not None
    assert report["inventory"] is not None and report["sequence"] == 1
    assert not state_dir.exists()  # sends nothing, writes nothing


def test_collect_continues_an_existing_spool_without_touching_it(tmp_path):
    spool = Spool(tmp_path / "spool.db")
    spool.next_sequence()
    spool.next_sequence()
    spool.close()
    done = fleet_agent("collect", "--json", "--state-dir", str(tmp_path), "--cloud", "none", "--window", "0")
    report = json.loads(done.stdout)
    assert report["sequence"] == 3 and report["agent"]["instance_id"] == spool.instance_id
    assert Spool(tmp_path / "spool.db").last_sequence() == 2


def test_collect_reads_a_named_kernel_log(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text(
        "[ 1234.567890] NVRM: Xid (PCI:0000:01:00): 79, pid=<unknown>, name=<unknown>, "
        "GPU has fallen off the bus.\n[ 1235.000000] usb 1-1: new high-speed USB device\n"
    )
    done = fleet_agent(
        "collect",
        "--json",
        "--state-dir",
        str(tmp_path / "s"),
        "--kernel-log",
        str(log),
        "--cloud",
        "none",
        "--window",
        "0",
    )
    events = json.loads(done.stdout)["events"]
    assert [(e["kind"], e["code"], e["pci_bus_id"]) for e in events] == [("xid", 79, "00000000:01:00.0")]
    again = fleet_agent(
        "collect",
        "--json",
        "--state-dir",
        str(tmp_path / "s"),
        "--kernel-log",
        str(log),
        "--cloud",
        "none",
        "--window",
        "0",
    )
    assert len(json.loads(again.stdout)["events"]) == 1  # a one-off look: the daemon's offset is untouched


def test_human_summary_without_json(tmp_path):
    done = fleet_agent("collect", "--state-dir", str(tmp_path), "--cloud", "none", "--window", "0")
    assert done.returncode == 0 and "NVML: library_not_found" in done.stdout


def test_enroll_status_and_verify_against_a_server(control_plane, tmp_path):
    state = str(tmp_path / "state")
    enrolled = fleet_agent(
        "enroll", "--server", control_plane.url, "--token", "fe_test", "--state-dir", state, "--cloud", "none"
    )
    assert enrolled.returncode == 0, enrolled.stderr
    assert "enrolled as node 1" in enrolled.stdout
    credential = tmp_path / "state" / "credential.json"
    assert stat.S_IMODE(credential.stat().st_mode) == 0o600
    facts = control_plane.enrollments[0]["facts"]
    assert facts["gpu_count"] == 0 and facts["cloud"]["provider"] is None

    status = fleet_agent("status", "--json", "--state-dir", state)
    shown = json.loads(status.stdout)
    assert (
        shown["enrolled"] is True
        and shown["node_id"] == 1
        and shown["instance_id"] == facts["agent_instance_id"]
    )
    assert shown["spool_depth"] == 0 and shown["last_acked_sequence"] == 0

    verify = fleet_agent("verify", "--state-dir", state, "--kernel-log", "off")
    rows = {line.split()[0]: line for line in verify.stdout.splitlines() if line.strip()}
    assert verify.returncode == 1  # no GPU here: a node without NVML must not pass
    assert "FAIL" in rows["nvml"] and "library_not_found" in rows["nvml"]
    assert "PASS" in rows["server"] and "/healthz 200" in rows["server"]
    assert "PASS" in rows["state"]  # the state dir disk check
    assert "PASS" in rows["enrolment"]


def test_enroll_with_a_bad_token_exits_1(control_plane, tmp_path):
    done = fleet_agent(
        "enroll",
        "--server",
        control_plane.url,
        "--token",
        "fe_nope",
        "--state-dir",
        str(tmp_path),
        "--cloud",
        "none",
    )
    assert done.returncode == 1 and "403" in done.stderr
    assert not (tmp_path / "credential.json").exists()


def test_enroll_needs_a_server(tmp_path):
    done = fleet_agent("enroll", "--token", "fe_x", "--state-dir", str(tmp_path))
    assert done.returncode == 2 and "'server'" in done.stderr


def test_version_and_scenario_list():
    assert fleet_agent("--version").stdout.strip() == "fleet-agent 0.1.0"
    listed = fleet_agent("scenarios").stdout
    assert "demo-fleet" in listed and "spot_notice_azure" in listed


def test_simulate_runs_nodes_against_the_server(control_plane, tmp_path):
    done = fleet_agent(
        "simulate",
        "--nodes",
        "3",
        "--scenario",
        "xid",
        "--server",
        control_plane.url,
        "--token",
        "fe_test",
        "--duration",
        "3",
        "--interval",
        "1",
        "--state-dir",
        str(tmp_path),
        "--log-level",
        "warning",
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["enrolled"] == 3 and summary["pending"] == 0 and summary["reports_acked"] >= 9
    hosts = {r["node"]["hostname"] for r in control_plane.reports()}
    assert hosts == {"bm-000", "bm-001", "bm-002"}
    assert len({e["facts"]["machine_id"] for e in control_plane.enrollments}) == 3


def test_simulate_rejects_a_bad_scenario(tmp_path):
    scenario = tmp_path / "bad.json"
    scenario.write_text(json.dumps({"nodes": [{"provider": "own", "faults": [{"at_s": 1, "fault": "xid"}]}]}))
    done = fleet_agent(
        "simulate",
        "--nodes",
        "1",
        "--scenario",
        str(scenario),
        "--server",
        "http://127.0.0.1:9",
        "--token",
        "t",
    )
    assert done.returncode == 2 and "nodes[0].faults[0].gpu" in done.stderr


def test_unusable_state_dir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = fleet_agent("run", "--state-dir", str(blocker / "state"), "--kernel-log", "off", "--cloud", "none")
    assert done.returncode == 1 and "Traceback" not in done.stderr and str(blocker) in done.stderr


def test_status_and_spool_commands_show_export_retry_and_drop_set_aside_reports(tmp_path, capsys, monkeypatch):
    from fleet_agent import cli

    monkeypatch.setattr(cli, "_setup_logging", lambda level: None)  # in-process: leave the root logger alone
    main = cli.main
    state = str(tmp_path / "state")
    assert main(["spool", "show-rejected", "--state-dir", state]) == 0
    assert "no spool at" in capsys.readouterr().out
    assert main(["spool", "retry-rejected", "--state-dir", state]) == 1

    spool = Spool(tmp_path / "state" / "spool.db")
    for _ in range(3):
        spool.put({"sequence": spool.next_sequence(), "events": [], "inventory": None, "note": "ü"})
    spool.reject(1, "refused as invalid: HTTP 400 from …: system.cpu_busy_pct")
    spool.reject(2, "5 server errors in a row, the last: HTTP 500")
    spool.close()

    assert main(["status", "--state-dir", state]) == 0
    shown = capsys.readouterr().out
    assert "rejected_reports     2" in shown and "report 2 at " in shown and "5 server errors" in shown
    assert "fleet-agent spool show-rejected" in shown
    assert main(["status", "--json", "--state-dir", state]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["rejected_reports"] == 2 and status["rejected_total"] == 2
    assert status["last_rejection"]["sequence"] == 2 and status["spool_depth"] == 1

    assert main(["spool", "show-rejected", "--state-dir", state]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].split()[0] == "1" and "cpu_busy_pct" in lines[0]
    assert main(["spool", "show-rejected", "--json", "--state-dir", state, "2"]) == 0
    (exported,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert exported["sequence"] == 2 and exported["report"]["note"] == "ü" and "HTTP 500" in exported["reason"]

    assert main(["spool", "retry-rejected", "--state-dir", state, "2", "99"]) == 1
    captured = capsys.readouterr()
    assert "2 -> 4" in captured.out and "99" in captured.err
    assert main(["spool", "drop-rejected", "--state-dir", state]) == 2  # names nothing: refuses
    capsys.readouterr()
    assert main(["spool", "drop-rejected", "--all", "--state-dir", state]) == 0
    assert "dropped 1" in capsys.readouterr().out
    spool = Spool(tmp_path / "state" / "spool.db")
    assert [r.sequence for r in spool.pending()] == [3, 4] and spool.rejected_count() == 0
    spool.close()
