"""Per-pool rule settings: the pool's override on top of the fleet-wide row, field by field."""

from fleet.health.models import Rule, RuleOverride
from fleet.health.services.rule_config import rule_configs

POOL = 7


def _row(pk: int, slug: str, **fields) -> Rule:
    values = {"enabled": True, "params": {}, "duration_s": 300, "clear_hold_s": 120, "severity": "warning"} | fields
    return Rule(pk=pk, slug=slug, **values)


def test_an_override_changes_only_what_it_sets():
    rows = [_row(1, "disk_io_wait", params={"iowait_pct": 30}, duration_s=600)]
    overrides = [RuleOverride(rule_id=1, pool_id=POOL, params={"await_ms": 50}, clear_hold_s=0)]
    configs = rule_configs(rows, overrides)

    fleet = configs[("disk_io_wait", None)]
    assert (fleet.params, fleet.duration_s, fleet.clear_hold_s, fleet.overridden) == (
        {"iowait_pct": 30, "await_ms": 200}, 600, 120, False)
    pool = configs[("disk_io_wait", POOL)]
    assert pool.params == {"iowait_pct": 30, "await_ms": 50}
    assert (pool.enabled, pool.duration_s, pool.clear_hold_s, pool.severity) == (True, 600, 0, "warning")
    assert pool.overridden is True


def test_an_override_can_disable_and_a_blank_enabled_inherits():
    rows = [_row(1, "tcp_retransmits", enabled=False), _row(2, "cpu_steal")]
    overrides = [RuleOverride(rule_id=1, pool_id=POOL, enabled=None), RuleOverride(rule_id=2, pool_id=POOL,
                                                                                   enabled=False)]
    configs = rule_configs(rows, overrides)
    assert configs[("tcp_retransmits", POOL)].enabled is False
    assert configs[("cpu_steal", None)].enabled is True
    assert configs[("cpu_steal", POOL)].enabled is False


def test_invalid_stored_parameters_are_ignored_parameter_by_parameter():
    rows = [_row(1, "disk_io_wait", params={"iowait_pct": "high", "await_ms": 100})]
    overrides = [RuleOverride(rule_id=1, pool_id=POOL, params={"await_ms": -5, "nonsense": 1})]
    configs = rule_configs(rows, overrides)
    assert configs[("disk_io_wait", None)].params == {"iowait_pct": 20, "await_ms": 100}
    assert configs[("disk_io_wait", POOL)].params == {"iowait_pct": 20, "await_ms": 100}


def test_rows_and_overrides_of_rules_gone_from_the_catalog_are_skipped():
    rows = [_row(1, "retired_rule"), _row(2, "tcp_retransmits")]
    overrides = [RuleOverride(rule_id=1, pool_id=POOL, enabled=False),
                 RuleOverride(rule_id=99, pool_id=POOL, enabled=False)]
    assert set(rule_configs(rows, overrides)) == {("tcp_retransmits", None)}
