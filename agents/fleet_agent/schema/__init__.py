"""The wire contract as JSON Schema (draft 2020-12): ``report-v1.schema.json``.

The agent never validates with it at run time (that would need the jsonschema package on every
node); the server and the tests do. ``$defs/report`` is one report, ``$defs/batch`` the envelope of
``POST /api/v1/agent/reports``, plus the enrolment and acknowledgement bodies.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources

SCHEMA_FILE = "report-v1.schema.json"


@cache
def _load() -> dict:
    return json.loads(resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


def report_schema() -> dict:
    """The whole document; its root validates one report."""
    return copy.deepcopy(_load())


def definition_schema(name: str) -> dict:
    """A stand-alone schema for one of the ``$defs`` (``batch``, ``enroll_request``, …)."""
    document = _load()
    if name not in document["$defs"]:
        raise KeyError(f"no $defs/{name} in {SCHEMA_FILE}")
    return {
        "$schema": document["$schema"],
        "$defs": copy.deepcopy(document["$defs"]),
        "$ref": f"#/$defs/{name}",
    }


def batch_schema() -> dict:
    return definition_schema("batch")
