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
    assert result["xid_events"]["gpus_registered"] == 8 and result["xid_events"]["events_in_2_s"] == []
