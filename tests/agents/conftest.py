"""Shared fixtures for the agent tests (no Django, no database, no network beyond 127.0.0.1)."""

from __future__ import annotations

import shutil
from pathlib import Path

import jsonschema
import pytest

from fleet_agent.schema import report_schema
from fleet_agent.simnvml import SimulatedGpu, SimulatedNvml

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def report_validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(report_schema())


@pytest.fixture
def assert_valid_report(report_validator):
    def check(report: dict) -> None:
        errors = sorted(report_validator.iter_errors(report), key=lambda e: list(e.absolute_path))
        assert not errors, [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5]]

    return check


@pytest.fixture
def sim_nvml() -> SimulatedNvml:
    """Eight H100s, as on a p5 / DGX node."""
    return SimulatedNvml([SimulatedGpu.from_model("H100-SXM-80GB", i, node_key="test") for i in range(8)])


@pytest.fixture
def proc_tree(tmp_path: Path):
    """A writable copy of a fixture /proc snapshot; call ``load("t1")`` to move it to the next one."""
    root = tmp_path / "proc"

    def load(snapshot: str) -> Path:
        shutil.copytree(FIXTURES / "proc" / snapshot, root, dirs_exist_ok=True)
        return root

    load.root = root
    return load


@pytest.fixture
def control_plane():
    from tests.agents.fake_control_plane import FakeControlPlane

    with FakeControlPlane() as server:
        yield server


def build_core(spool, nvml: SimulatedNvml | None = None, *, node_id: int | None = None):
    """A real AgentCore on simulated NVML and fixture /proc, spooling into ``spool``."""
    from fleet_agent.agent import AgentCore
    from fleet_agent.collectors.stack import StackCollector
    from fleet_agent.collectors.system import SystemCollector
    from fleet_agent.nvml import NvmlAdapter
    from fleet_agent.report import NodeIdentity, ReportBuilder

    nvml = nvml or SimulatedNvml(
        [SimulatedGpu.from_model("H100-SXM-80GB", i, node_key="core") for i in range(2)]
    )
    return AgentCore(
        builder=ReportBuilder(
            sequences=spool, identity=NodeIdentity("machine-1", "gpu-01", node_id), interval_s=15
        ),
        nvml=NvmlAdapter(nvml),
        system=SystemCollector(FIXTURES / "proc" / "t0"),
        stack=StackCollector(
            host_root=FIXTURES / "host", proc_root=FIXTURES / "proc" / "t0", runner=lambda argv, timeout: None
        ),
        spool=spool,
    )
