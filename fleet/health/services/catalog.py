"""Keeping `Rule` rows in step with the code definitions."""

from ..models import Rule
from ..rules.catalog import sync_rule_rows


def rule_catalog_sync() -> tuple[int, int]:
    """Create rows for new rule definitions and refresh their descriptions; returns (created, updated)."""
    return sync_rule_rows(Rule)
