"""Validation of agent report batches against the shared JSON Schema, plus checks a schema cannot express.

The schema ships inside the agent package (`fleet_agent/schema/report-v1.schema.json`) so the agent and
the server validate against the same file. It is compiled once per process with fastjsonschema.
"""

import json
from datetime import UTC, datetime, timedelta
from functools import cache
from importlib import resources

import fastjsonschema

SUPPORTED_MAJOR = 1
MAX_REPORTS_PER_BATCH = 100
MAX_FUTURE_SKEW = timedelta(minutes=5)


class ReportInvalid(Exception):
    def __init__(self, fields: dict[str, list[str]], code: str = "invalid", status: int = 400):
        self.fields = fields
        self.code = code
        self.status = status
        super().__init__("; ".join(f"{k}: {', '.join(v)}" for k, v in fields.items()))


@cache
def report_schema() -> dict:
    source = resources.files("fleet_agent").joinpath("schema", "report-v1.schema.json")
    return json.loads(source.read_text())


@cache
def _report_validator():
    schema = report_schema()
    # The file describes one report at its root and may carry the batch envelope under $defs.
    return fastjsonschema.compile(schema)


def _field_path(name: str, prefix: str) -> str:
    # fastjsonschema names the failing value like "data.gpus[1].utilization_gpu_pct".
    path = name[len("data"):] if name.startswith("data") else name
    return f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path.lstrip('.')}" if path else prefix


def parse_time(value: str) -> datetime:
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError("timestamp needs a time zone (use Z for UTC)")
    return parsed.astimezone(UTC)


def validate_batch(payload, *, now: datetime) -> list[dict]:
    """Return the batch's reports sorted by sequence, or raise ReportInvalid naming every bad field."""
    if not isinstance(payload, dict) or not isinstance(payload.get("reports"), list):
        raise ReportInvalid({"reports": ["Expected an object with a list of reports."]})
    reports = payload["reports"]
    if not reports:
        raise ReportInvalid({"reports": ["The batch is empty."]})
    if len(reports) > MAX_REPORTS_PER_BATCH:
        raise ReportInvalid({"reports": [f"At most {MAX_REPORTS_PER_BATCH} reports per batch."]}, status=413,
                            code="too_large")
    validator = _report_validator()
    errors: dict[str, list[str]] = {}
    for index, report in enumerate(reports):
        prefix = f"reports[{index}]"
        version = report.get("schema_version") if isinstance(report, dict) else None
        if not isinstance(version, str) or not version.split(".")[0].isdigit():
            raise ReportInvalid({f"{prefix}.schema_version": ["Missing or malformed schema version."]},
                                code="unsupported_version")
        if int(version.split(".")[0]) != SUPPORTED_MAJOR:
            raise ReportInvalid({f"{prefix}.schema_version": [
                f"Schema major version {version} is not supported; this server speaks {SUPPORTED_MAJOR}.x."]},
                code="unsupported_version")
        try:
            validator(report)
        except fastjsonschema.JsonSchemaValueException as exc:
            path = _field_path(exc.name, prefix)
            errors.setdefault(path, []).append(exc.message.replace(exc.name, path, 1))
            continue
        for path, value in _timestamps(report, prefix):
            try:
                moment = parse_time(value)
            except ValueError as exc:
                errors.setdefault(path, []).append(f"Not an RFC 3339 timestamp: {exc}")
                continue
            if moment > now + MAX_FUTURE_SKEW:
                errors.setdefault(path, []).append("Timestamp is in the future; check the node's clock.")
    if errors:
        raise ReportInvalid(errors)
    return sorted(reports, key=lambda r: r["sequence"])


def _timestamps(report: dict, prefix: str):
    yield f"{prefix}.collected_at", report["collected_at"]
    for index, event in enumerate(report.get("events") or []):
        if event.get("at"):
            yield f"{prefix}.events[{index}].at", event["at"]

