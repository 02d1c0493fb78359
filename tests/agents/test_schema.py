"""The JSON Schema: what the agent produces validates, and what it must not produce does not."""

from __future__ import annotations

import copy

import jsonschema
import pytest

from fleet_agent.agent import AgentCore
from fleet_agent.collectors.stack import StackCollector
from fleet_agent.collectors.system import SystemCollector
from fleet_agent.nvml import NvmlAdapter
from fleet_agent.report import EphemeralSequences, NodeIdentity, ReportBuilder
from fleet_agent.schema import batch_schema, definition_schema, report_schema
from fleet_agent.simulator import SimulatedAgent, bundled_scenarios, load_scenario
from tests.agents.conftest import FIXTURES


def test_schema_documents_are_valid_draft_2020_12():
    jsonschema.Draft202012Validator.check_schema(report_schema())
    for name in ("batch", "batch_response", "enroll_request", "enroll_response", "error"):
        jsonschema.Draft202012Validator.check_schema(definition_schema(name))


@pytest.mark.parametrize("scenario", bundled_scenarios())
def test_every_scenario_produces_valid_reports(scenario, tmp_path, assert_valid_report):
    loaded = load_scenario(scenario)
    ordinals = range(len(loaded.nodes)) if len(loaded.nodes) <= 2 else (0, len(loaded.nodes) - 1)
    for ordinal in ordinals:
        agent = SimulatedAgent.from_scenario(loaded, ordinal, work_dir=tmp_path)
        produced = [agent.step(t) for t in (0, 15, 31, 61, 200)]
        assert any(produced)
        for report in filter(None, produced):
            assert_valid_report(report)
        agent.close()


@pytest.fixture
def no_gpu_report(tmp_path):
    """The path a node without a driver takes: the real pynvml, which finds no libnvidia-ml here."""
    core = AgentCore(
        builder=ReportBuilder(
            sequences=EphemeralSequences("0b7cd3a2-4bd6-4a57-9f07-5f4b50b2d4c2"),
            identity=NodeIdentity("m", "h"),
            interval_s=15,
        ),
        nvml=NvmlAdapter(),
        system=SystemCollector(FIXTURES / "proc" / "t0"),
        stack=StackCollector(
            host_root=FIXTURES / "host", proc_root=FIXTURES / "proc" / "t0", runner=lambda argv, timeout: None
        ),
    )
    return core.collect()


def test_no_gpu_report_is_valid(no_gpu_report, assert_valid_report):
    assert_valid_report(no_gpu_report)
    assert no_gpu_report["visibility"]["nvml"] == "library_not_found" and no_gpu_report["gpus"] == []


def _errors(document: dict) -> list[str]:
    validator = jsonschema.Draft202012Validator(report_schema())
    return [".".join(map(str, e.absolute_path)) or "(root)" for e in validator.iter_errors(document)]


def test_typo_at_the_top_level_is_caught(no_gpu_report):
    report = copy.deepcopy(no_gpu_report)
    report["visibilty"] = report.pop("visibility")
    assert _errors(report)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("system", "cpu_busy_pct"), 101.0),
        (("system", "cpu_steal_pct"), -1),
        (("visibility", "nvml"), "fine"),
        (("sequence",), 0),
        (("schema_version",), "2.0"),
        (("collected_at",), "yesterday"),
        (("agent", "instance_id"), "not-a-uuid"),
        (("node", "hostname"), "x" * 300),
        (("system", "unexpected"), 1),
    ],
)
def test_out_of_bounds_values_are_rejected(no_gpu_report, path, value):
    report = copy.deepcopy(no_gpu_report)
    target = report
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert _errors(report)


def test_gpu_bounds(tmp_path):
    agent = SimulatedAgent.from_scenario(load_scenario("healthy"), 0, work_dir=tmp_path)
    report = agent.step(0)
    assert not _errors(report)
    for field, value in (
        ("temperature_c", 250),
        ("utilization_gpu_pct", 120),
        ("memory_used_bytes", -5),
        ("compute_capability", "nine"),
    ):
        broken = copy.deepcopy(report)
        broken["gpus"][0][field] = value
        assert _errors(broken) == [f"gpus.0.{field}"]
    too_many = copy.deepcopy(report)
    too_many["gpus"] = too_many["gpus"] * 9  # 72 > 64
    assert "gpus" in _errors(too_many)


def test_batch_envelope_limits(no_gpu_report):
    validator = jsonschema.Draft202012Validator(batch_schema())
    assert validator.is_valid({"reports": [no_gpu_report]})
    assert not validator.is_valid({"reports": []})
    assert not validator.is_valid({"reports": [no_gpu_report] * 101})
    assert not validator.is_valid({"reports": [no_gpu_report], "extra": 1})


def test_enrolment_facts_match_the_schema(tmp_path):
    agent = SimulatedAgent.from_scenario(load_scenario("spot_notice_aws"), 0, work_dir=tmp_path)
    body = {"token": "fe_x", "facts": agent.enroll_facts()}
    jsonschema.validate(body, definition_schema("enroll_request"))
    assert body["facts"]["gpu_count"] == 8 and body["facts"]["cloud"]["spot"] is True


def test_the_servers_validator_agrees(no_gpu_report, tmp_path):
    """The server compiles this schema with fastjsonschema (and jsonschema-rs: tests/telemetry/
    test_validators_agree.py): it must accept and reject the same things."""
    fastjsonschema = pytest.importorskip("fastjsonschema")
    validate = fastjsonschema.compile(report_schema())
    agent = SimulatedAgent.from_scenario(load_scenario("spot_notice_gcp"), 0, work_dir=tmp_path)
    agent.step(0)
    for report in (no_gpu_report, agent.step(31)):
        validate(report)
        broken = copy.deepcopy(report)
        broken["system"]["cpu_busy_pct"] = 250
        with pytest.raises(fastjsonschema.JsonSchemaException):
            validate(broken)
