import csv
import io

from rest_framework import renderers

COST_REPORT_COLUMNS = [
    "node_id", "hostname", "provider", "site", "pool", "instance_type", "billing_mode", "rate_source", "currency",
    "gpu_count", "compute", "storage", "egress", "backup", "ops", "total", "gpu_hours", "tco_per_gpu_hour",
    "utilisation_pct", "tco_per_utilised_gpu_hour", "warnings",
]


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return "; ".join(str(v) for v in value)
    return str(value)


class CostReportCSVRenderer(renderers.BaseRenderer):
    """The cost report's rows as CSV: a header, then one line per node (monthly figures)."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(COST_REPORT_COLUMNS)
        for row in (data or {}).get("rows", []):
            writer.writerow([_cell(row.get(column)) for column in COST_REPORT_COLUMNS])
        return buffer.getvalue().encode(self.charset)
