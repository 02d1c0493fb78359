"""Every rule definition in triage order, and the sync of definitions into `Rule` rows."""

from ..choices import STEP_ORDER
from . import capacity, diagnostics, fabric, host, platform_hardware, software_chain, visibility, xid
from .base import RuleDefinition

_DEFINED: list[RuleDefinition] = [
    *visibility.RULES,
    *fabric.VISIBILITY_RULES,
    *software_chain.RULES,
    *fabric.SOFTWARE_CHAIN_RULES,
    *capacity.RULES,
    *host.RULES,  # host checks of steps 2-4 (memory, data volumes, clock, peer memory, D state)
    *platform_hardware.RULES,
    *xid.RULES,
    *fabric.PLATFORM_HARDWARE_RULES,
    *diagnostics.RULES,
]
# Triage order; a module may hold rules of several steps (host.py), their order within a step is kept.
RULES: list[RuleDefinition] = sorted(_DEFINED, key=lambda rule: STEP_ORDER.index(rule.step))
RULES_BY_SLUG: dict[str, RuleDefinition] = {rule.slug: rule for rule in RULES}
assert len(RULES_BY_SLUG) == len(RULES), "rule slugs must be unique"

# Fields that follow the code on every sync; the rest (thresholds, durations, severity, enabled) are operators'.
DEFINITION_FIELDS = ["title", "description", "step", "layer", "scope"]


def definition_row(rule: RuleDefinition) -> dict:
    return {"slug": rule.slug, "title": rule.title, "description": rule.description, "step": rule.step,
            "layer": rule.layer, "scope": rule.scope, "severity": rule.severity, "duration_s": rule.duration_s,
            "clear_hold_s": rule.clear_hold_s, "params": rule.default_params(), "enabled": True}


def sync_rule_rows(rule_model) -> tuple[int, int]:
    """Create rows for new definitions and refresh descriptive fields of existing ones; operators' values stay.

    Takes the model class so the data migration can pass its historical model. Returns (created, updated).
    """
    existing = {row.slug: row for row in rule_model.objects.all()}
    created, changed = [], []
    for rule in RULES:
        values = definition_row(rule)
        row = existing.get(rule.slug)
        if row is None:
            created.append(rule_model(**values))
            continue
        # New parameters get their default; parameters that no longer exist are dropped.
        params = {**rule.default_params(), **{k: v for k, v in (row.params or {}).items() if rule.param(k)}}
        if any(getattr(row, f) != values[f] for f in DEFINITION_FIELDS) or params != row.params:
            for field in DEFINITION_FIELDS:
                setattr(row, field, values[field])
            row.params = params
            changed.append(row)
    if created:
        rule_model.objects.bulk_create(created, ignore_conflicts=True)
    if changed:
        rule_model.objects.bulk_update(changed, DEFINITION_FIELDS + ["params"])
    return len(created), len(changed)
