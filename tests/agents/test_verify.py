"""``fleet-agent verify`` checks."""

from __future__ import annotations

import io
import json

from fleet_agent.collectors.stack import CommandResult
from fleet_agent.config import load_config
from fleet_agent.nvml import NvmlAdapter
from fleet_agent.verify import (
    FAIL,
    PASS,
    SKIP,
    check_compute,
    check_disk,
    check_gpu_count,
    check_gpu_memory,
    print_table,
    run_checks,
)


def test_healthy_simulated_node_passes(tmp_path, sim_nvml):
    config = load_config(
        config_file=None,
        environ={},
        flags={"state_dir": str(tmp_path), "expected_gpus": "8", "kernel_log": "off"},
    )
    results = {r.name: r for r in run_checks(config, nvml_module=sim_nvml)}
    assert results["nvml"].result == PASS and "550.54.15" in results["nvml"].detail
    assert results["gpu count"].result == PASS and results["gpu memory"].result == PASS
    assert results["state dir disk"].result == PASS
    assert results["compute"].result == SKIP and results["server"].result == SKIP
    out = io.StringIO()
    print_table(list(results.values()), out)
    assert "PASS: 0 check(s) failed" in out.getvalue()


def test_missing_and_lost_gpus_fail(sim_nvml):
    adapter = NvmlAdapter(sim_nvml, expected_gpu_count=8)
    adapter.sample()
    sim_nvml.gpus[3].lost = True
    sim_nvml.gpus[7].enumerated = False
    sample = adapter.sample()
    assert check_gpu_count(sample).result == FAIL
    memory = check_gpu_memory(sample)
    assert memory.result == FAIL and "3" in memory.detail


def _runner(payload):
    return lambda argv, timeout: CommandResult(0, json.dumps(payload) + "\n", "")


def test_compute_check_outcomes():
    assert check_compute(None).result == SKIP
    assert check_compute("python", _runner({"torch": False})).result == SKIP
    assert check_compute("python", _runner({"torch": True, "cuda": False})).result == FAIL
    ok = check_compute(
        "python", _runner({"torch": True, "cuda": True, "devices": [{"index": 0, "ok": True}]})
    )
    assert ok.result == PASS
    bad = check_compute(
        "python",
        _runner(
            {"torch": True, "cuda": True, "devices": [{"index": 0, "ok": True}, {"index": 1, "ok": False}]}
        ),
    )
    assert bad.result == FAIL and "1" in bad.detail
    assert check_compute("python", lambda argv, timeout: None).result == FAIL


def test_disk_check_fails_on_an_unusable_state_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert check_disk(str(blocker / "state")).result == FAIL
    assert check_disk(str(tmp_path / "state")).result == PASS
