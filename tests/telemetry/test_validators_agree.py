"""The server's two validators of one report (fleet/telemetry/validation.py) must not disagree in the one way
that matters: jsonschema-rs answers "valid?" first, and a yes skips fastjsonschema, so jsonschema-rs may never
accept what fastjsonschema refuses. Checked on every leaf of real reports replaced by hostile values, and on reports
generated from the schema with values just outside it."""

import copy
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import fastjsonschema
import jsonschema_rs
import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from fleet.telemetry.validation import ReportInvalid, validate_batch
from fleet_agent.schema import report_schema
from fleet_agent.simulator import SimulatedAgent, load_scenario
from tests.telemetry.schema_strategies import report_strategy

NOW = datetime.now(UTC)
FAST = jsonschema_rs.validator_for(report_schema())
STRICT = fastjsonschema.compile(report_schema())
HOSTILE = [None, True, False, 0, -1, 1.0, 1.5, -1e308, 1e308, 2**63 - 1, -(2**63), "", "x" * 5000, "1.0",
           "2026-01-01T00:00:00Z\n", "\x00", [], [1], {}, {"unexpected": 1}]


def _strict_accepts(report) -> bool:
    try:
        STRICT(report)
    except fastjsonschema.JsonSchemaException:
        return False
    return True


def _leaves(value, path=()):
    if isinstance(value, dict):
        yield path
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        yield path
        if value:  # the items of a list share one schema: the first stands for the rest
            yield from _leaves(value[0], (*path, 0))
    else:
        yield path


class _Swap:
    """Replace the value at `path` in place for the block's duration (a deep copy per mutation is too slow)."""

    def __init__(self, report, path, value):
        self.parent = report
        for step in path[:-1]:
            self.parent = self.parent[step]
        self.key, self.value = path[-1], value

    def __enter__(self):
        self.saved = self.parent[self.key]
        self.parent[self.key] = self.value

    def __exit__(self, *exc):
        self.parent[self.key] = self.saved


def _disagree(report) -> bool:
    return FAST.is_valid(report) and not _strict_accepts(report)


@pytest.fixture(scope="module")
def real_reports():
    reports = []
    with tempfile.TemporaryDirectory() as work:
        for scenario in ("healthy", "spot_notice_aws", "xid", "ib_port_down"):
            agent = SimulatedAgent.from_scenario(load_scenario(scenario), 0, work_dir=Path(work) / scenario)
            reports += [agent.step(0), agent.step(31)]
            agent.close()
    # Through JSON and back, as the server sees them.
    return [orjson.loads(orjson.dumps(report)) for report in reports]


def test_both_accept_real_reports(real_reports):
    for report in real_reports:
        assert FAST.is_valid(report) and _strict_accepts(report)


def test_the_fast_validator_accepts_nothing_the_strict_one_refuses(real_reports):
    checked = refused = 0
    for report in real_reports:
        for path in _leaves(report):
            if not path:
                continue
            for value in HOSTILE:
                with _Swap(report, path, value):
                    strict = _strict_accepts(report)
                    assert not (FAST.is_valid(report) and not strict), (path, value)
                checked += 1
                refused += not strict
            target = report
            for step in path:
                target = target[step]
            if isinstance(target, dict):  # a key the schema does not know, in every object
                with _Extra(target):
                    assert not _disagree(report), (path, "unexpected key")
    # The sweep must have exercised refusals, not only harmless replacements.
    assert checked > 5_000 and refused > checked // 3


class _Extra:
    def __init__(self, target: dict):
        self.target = target

    def __enter__(self):
        self.target["unexpected"] = 1

    def __exit__(self, *exc):
        del self.target["unexpected"]


@settings(max_examples=300, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(report=report_strategy(now=NOW, nasty=0.05))
def test_generated_reports_fast_yes_implies_strict_yes(report):
    try:
        report = orjson.loads(orjson.dumps(report))
    except TypeError:  # an integer past 64 bits: the server's JSON parser refuses the body before validation
        return
    assert not _disagree(report)


def test_an_invalid_report_is_named_by_the_strict_validator(real_reports):
    """The quick no falls through to fastjsonschema, whose message names the field as the API always has."""
    broken = copy.deepcopy(real_reports[0])
    broken["gpus"][1]["temperature_c"] = 250
    with pytest.raises(ReportInvalid) as caught:
        validate_batch({"reports": [broken]}, now=NOW, has_nul=False)
    assert list(caught.value.fields) == ["reports[0].gpus[1].temperature_c"]
