from fleet.core.api.renderers import CSVRenderer

COST_REPORT_COLUMNS = [
    "node_id", "hostname", "provider", "site", "pool", "instance_type", "billing_mode", "rate_source", "currency",
    "gpu_count", "compute", "storage", "egress", "backup", "ops", "total", "gpu_hours", "tco_per_gpu_hour",
    "utilisation_pct", "tco_per_utilised_gpu_hour", "warnings",
]


class CostReportCSVRenderer(CSVRenderer):
    """The cost report's rows as CSV: a header, then one line per node (monthly figures)."""

    columns = COST_REPORT_COLUMNS

    def rows(self, data) -> list[dict]:
        return (data or {}).get("rows", [])
