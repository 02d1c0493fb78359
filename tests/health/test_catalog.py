import pytest

from fleet.health.choices import STEP_ORDER
from fleet.health.models import Rule, XidPolicy
from fleet.health.rules.catalog import RULES, sync_rule_rows
from fleet.health.services.catalog import rule_catalog_sync
from fleet.inventory.choices import Layer

pytestmark = pytest.mark.django_db

ISSUE_RULES = {
    "visibility": {"nvml_unavailable", "gpu_count_low", "gpu_lost", "gpu_baseline_mismatch"},
    "software_chain": {"cuda_driver_too_old", "arch_not_supported", "stack_drift"},
    "capacity": {"gpu_memory_pressure", "residual_gpu_processes", "data_pipeline_bottleneck", "disk_io_wait",
                 "tcp_retransmits"},
    "platform_hardware": {"cpu_steal", "xid", "xid_escalation", "ecc_uncorrectable", "pending_page_retirement",
                          "row_remap_failure", "pcie_link_degraded", "thermal_throttling", "power_throttling",
                          "sxid_fatal", "preemption_notice", "silent_spot_node", "checkpoint_stale"},
}


def test_the_data_migration_seeded_every_rule_with_its_defaults():
    rows = {r.slug: r for r in Rule.objects.all()}
    assert set(rows) == {r.slug for r in RULES}
    for definition in RULES:
        row = rows[definition.slug]
        assert (row.step, row.layer, row.scope, row.severity) == (definition.step, definition.layer,
                                                                  definition.scope, definition.severity)
        assert row.params == definition.default_params()
        assert row.enabled


def test_every_rule_the_issue_asks_for_is_in_its_step():
    for step, slugs in ISSUE_RULES.items():
        assert slugs <= {r.slug for r in RULES if r.step == step}, step


def test_catalog_is_in_triage_order_and_well_formed():
    assert [STEP_ORDER.index(r.step) for r in RULES] == sorted(STEP_ORDER.index(r.step) for r in RULES)
    for rule in RULES:
        assert rule.layer in Layer.values
        assert rule.title and rule.description and rule.remedy, rule.slug
        for param in rule.params:
            assert param.clean(param.default) == param.default, (rule.slug, param.name)


def test_sync_keeps_operator_values_and_refreshes_descriptions():
    Rule.objects.filter(slug="gpu_memory_pressure").update(title="old title", params={"threshold_pct": 80.0,
                                                                                      "gone": 1}, duration_s=5)
    Rule.objects.filter(slug="tcp_retransmits").delete()
    assert rule_catalog_sync() == (1, 1)
    row = Rule.objects.get(slug="gpu_memory_pressure")
    assert row.title == "GPU memory nearly full"
    assert (row.params, row.duration_s) == ({"threshold_pct": 80.0}, 5)
    assert Rule.objects.filter(slug="tcp_retransmits").exists()
    assert sync_rule_rows(Rule) == (0, 0)


def test_xid_policy_table_starts_at_version_one():
    assert set(XidPolicy.objects.values_list("changed_in_version", flat=True)) == {1}
