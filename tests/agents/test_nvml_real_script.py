"""bench/nvml_real.py is the prepared check for a machine with a real GPU; keep it runnable where there is none."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_real_gpu_check_runs_against_the_simulated_driver():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "agents")}
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "nvml_real.py"), "--simulate", "--cycles", "3"],
                         capture_output=True, text=True, env=env, timeout=120, check=True).stdout
    result = json.loads(out)
    assert result["visibility"]["nvml"] == "ok" and result["visibility"]["gpu_count"] == 8
    assert result["adapter_sample"]["gpus"] == 8 and result["adapter_sample"]["cpu_ms_p50"] > 0
    assert result["gpus"][0]["unavailable"] == ["retired_pages"]  # an H100 has row remapping instead
    assert result["gpus"][0]["temperature_thresholds"] == {"shutdown_c": 92, "slowdown_c": 89, "gpu_max_c": 87}
    assert result["xid_events"]["gpus_registered"] == 8 and result["xid_events"]["events_in_2_s"] == []


def test_the_real_gpu_check_reports_whether_dcgm_is_present(tmp_path):
    from tests.agents import fake_dcgmi

    bare = {**os.environ, "PYTHONPATH": str(ROOT / "agents"), "PATH": os.path.dirname(sys.executable)}
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "nvml_real.py"), "--simulate", "--cycles", "1"],
                         capture_output=True, text=True, env=bare, timeout=120, check=True).stdout
    assert json.loads(out)["dcgm"] == {"dcgmi": None, "version": None, "hostengine_binary": None,
                                       "hostengine_reachable": None}
    fake_dcgmi.install(tmp_path, {1: ("dcgm3_r2_pass.json", 0)})
    with_dcgm = {**bare, "PATH": f"{tmp_path}{os.pathsep}{bare['PATH']}"}
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "nvml_real.py"), "--simulate", "--cycles", "1",
                          "--dcgm-diag", "1"], capture_output=True, text=True, env=with_dcgm, timeout=120,
                         check=True).stdout
    dcgm = json.loads(out)["dcgm"]
    assert dcgm["dcgmi"] == str(tmp_path / "dcgmi") and dcgm["version"] == "4.2.3" and dcgm["hostengine_reachable"]
    assert dcgm["diag"]["outcome"] == "pass" and dcgm["diag"]["summary"]["level"] == 1
