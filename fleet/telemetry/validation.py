"""Validation of agent report batches against the agent package's JSON Schema, plus what a schema cannot say.

The schema ships inside the agent package (`fleet_agent.schema`) so the agent and the server validate against
the same file. Each server process compiles it twice: with jsonschema-rs (Rust), which answers "valid?"
for a steady 8-GPU report in about 40 µs, and with fastjsonschema (generated Python, about 270 µs), which only runs
when the first says no and names the failing field in the words the API has always used. A report is valid when
either accepts it; a differential test (tests/telemetry/test_validators_agree.py) holds that jsonschema-rs
accepts nothing fastjsonschema refuses, so the fast answer never widens what the server takes. The schema bounds
every number, string, list and nesting level a report may carry. What it cannot express is checked or sanitised here:

* timestamps must parse and lie between `MIN_TIMESTAMP` and a few minutes past the server's clock (a notice's
  deadline may be up to `MAX_DEADLINE_AHEAD` ahead), so no calendar edge reaches the database;
* a NUL character (which PostgreSQL text and JSON cannot hold) is replaced by U+FFFD in every string and key:
  it turns up in real kernel log lines, and refusing the report would throw the rest of its evidence away.
"""

from datetime import UTC, datetime, timedelta
from functools import cache

import fastjsonschema
import jsonschema_rs

from fleet_agent.schema import batch_schema, report_schema

SUPPORTED_MAJOR = 1
MAX_FUTURE_SKEW = timedelta(minutes=5)
MAX_DEADLINE_AHEAD = timedelta(days=400)
# No node's clock legitimately reads earlier; earlier readings are a dead RTC or a hostile value.
MIN_TIMESTAMP = datetime(2000, 1, 1, tzinfo=UTC)
NUL = "\x00"
NUL_REPLACEMENT = "\ufffd"


class ReportInvalid(Exception):
    def __init__(self, fields: dict[str, list[str]], code: str = "invalid", status: int = 400):
        self.fields = fields
        self.code = code
        self.status = status
        super().__init__("; ".join(f"{k}: {', '.join(v)}" for k, v in fields.items()))


@cache
def _report_validator():
    # The document's root validates one report; each is validated alone so errors name reports[i].
    return fastjsonschema.compile(report_schema())


@cache
def _report_is_valid():
    """The quick yes/no (jsonschema-rs); fastjsonschema's verdict stands whenever this says no."""
    is_valid = jsonschema_rs.validator_for(report_schema()).is_valid

    def check(report) -> bool:
        try:
            return is_valid(report)
        except (ValueError, TypeError, OverflowError):  # a value it cannot convert: let fastjsonschema judge
            return False
    return check


def warm_up() -> None:
    """Compile the validator now (about 0.3 s of CPU) rather than in a web worker's first report, while the
    requests behind it wait long enough to be shed (config/wsgi.py calls this before the worker accepts)."""
    _report_validator()
    _report_is_valid()
    max_reports_per_batch()


@cache
def max_reports_per_batch() -> int:
    return batch_schema()["$defs"]["batch"]["properties"]["reports"]["maxItems"]


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
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+14:00 has no UTC equivalent
        raise ValueError("timestamp is outside the calendar once converted to UTC") from None


def validate_batch(payload, *, now: datetime, has_nul: bool = True) -> list[dict]:
    """Return the batch's reports sorted by sequence, or raise ReportInvalid naming every bad field.

    `has_nul=False` tells that the raw body holds no JSON NUL escape, which saves walking every string.
    """
    if not isinstance(payload, dict) or not isinstance(payload.get("reports"), list):
        raise ReportInvalid({"reports": ["Expected an object with a list of reports."]})
    extra = sorted(set(payload) - {"reports"})
    if extra:
        raise ReportInvalid({name: ["Unexpected field in the batch envelope."] for name in extra})
    reports = payload["reports"]
    if not reports:
        raise ReportInvalid({"reports": ["The batch is empty."]})
    limit = max_reports_per_batch()
    if len(reports) > limit:
        raise ReportInvalid({"reports": [f"At most {limit} reports per batch."]}, status=413, code="too_large")
    is_valid, validator = _report_is_valid(), _report_validator()
    errors: dict[str, list[str]] = {}
    for index, report in enumerate(reports):
        prefix = f"reports[{index}]"
        version = report.get("schema_version") if isinstance(report, dict) else None
        if not isinstance(version, str) or not version.split(".")[0].isdigit():
            raise ReportInvalid({f"{prefix}.schema_version": ["Missing or malformed schema version."]},
                                code="unsupported_version")
        if int(version.split(".")[0]) != SUPPORTED_MAJOR:
            raise ReportInvalid({f"{prefix}.schema_version": [
                f"Schema major version {version[:20]} is not supported; this server speaks {SUPPORTED_MAJOR}.x."]},
                code="unsupported_version")
        try:
            if not is_valid(report):
                validator(report)
        except fastjsonschema.JsonSchemaValueException as exc:
            path = _field_path(exc.name, prefix)
            errors.setdefault(path, []).append(exc.message.replace(exc.name, path, 1))
            continue
        for path, value, latest in _timestamps(report, prefix, now):
            try:
                moment = parse_time(value)
            except ValueError as exc:
                errors.setdefault(path, []).append(f"Not an RFC 3339 timestamp: {exc}")
                continue
            if moment < MIN_TIMESTAMP:
                errors.setdefault(path, []).append(
                    f"Timestamp is before {MIN_TIMESTAMP:%Y-%m-%d}; check the node's clock.")
            elif moment > latest:
                errors.setdefault(path, []).append("Timestamp is in the future; check the node's clock.")
    if errors:
        raise ReportInvalid(errors)
    if has_nul:
        reports = [_without_nul(report) for report in reports]
    return sorted(reports, key=lambda r: r["sequence"])


def _timestamps(report: dict, prefix: str, now: datetime):
    """(path, value, latest allowed moment) of every timestamp in a schema-valid report."""
    observed = now + MAX_FUTURE_SKEW
    yield f"{prefix}.collected_at", report["collected_at"], observed
    for index, event in enumerate(report["events"]):
        yield f"{prefix}.events[{index}].at", event["at"], observed
    notice = (report["cloud"] or {}).get("notice")
    if notice:
        if notice["received_at"]:
            yield f"{prefix}.cloud.notice.received_at", notice["received_at"], observed
        if notice["deadline"]:
            yield f"{prefix}.cloud.notice.deadline", notice["deadline"], now + MAX_DEADLINE_AHEAD


def _without_nul(value):
    if isinstance(value, str):
        return value.replace(NUL, NUL_REPLACEMENT) if NUL in value else value
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    return value

