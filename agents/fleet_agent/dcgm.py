"""DCGM active diagnostics: run ``dcgmi diag -r LEVEL -j`` where DCGM is installed and read its JSON.

Levels (NVIDIA's DCGM Diagnostics guide): 1 — a quick readiness check (deployment, software, PCIe/NVLink status,
seconds to a minute); 2 — the epilogue after a failed job (adds the memory, PCIe and compute tests, a few
minutes); 3 — the post-mortem (adds targeted stress / power and memory bandwidth, tens of minutes). The active
levels need the GPUs to themselves.

``dcgmi diag -j`` has printed two document shapes:

* DCGM 2.x / 3.x: ``{"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results":
  [{"gpu_ids": "0", "status": "Pass", "info", "warnings"}]}]}], "version", "Driver Version Detected"}}`` —
  results without ``gpu_ids`` are node-wide (the Deployment checks);
* DCGM 4.x: ``{"DCGM Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results":
  [{"entity_group": "GPU", "entity_id": 0, "status", "warnings": [{"warning", "error_id", …}]}],
  "test_summary": {"status"}}]}]}, "entity_groups": […], "metadata": {"version", "Driver Version Detected"}}``.

Both are read into one normalized result. A status word this module does not know is never read as a pass.
``dcgmi`` exits non-zero when a test fails, so its exit status alone decides nothing: the document does. Nothing
here raises on bad output; what cannot be read becomes an ``error`` result that says why.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from fleet_agent.timeutil import rfc3339, utc_now

LEVELS = (1, 2, 3)
# Generous ceilings: level 3 on eight GPUs takes 30-45 minutes on recent DCGM releases.
LEVEL_TIMEOUT_S = {1: 600, 2: 1800, 3: 5400}
# Categories whose failures are the hardware's (the rest, Deployment, are the node's software/config).
HARDWARE_CATEGORIES = frozenset({"hardware", "integration", "stress", "performance"})
MAX_FAILURES = 32
MAX_TEXT = 300
RAW_LIMIT = 8000

_STATUS = {"pass": "pass", "fail": "fail", "warn": "warn", "warning": "warn", "skip": "skip", "skipped": "skip",
           "not run": "not_run", "notrun": "not_run", "not_run": "not_run"}


class DiagParseError(ValueError):
    pass


@dataclass
class TestResult:
    category: str
    name: str
    status: str  # pass | fail | warn | skip | not_run | unknown
    gpu_index: int | None
    warnings: list[str] = field(default_factory=list)

    @property
    def hardware(self) -> bool:
        return self.category.lower() in HARDWARE_CATEGORIES


@dataclass
class DiagResult:
    dcgm_version: str | None
    driver_version: str | None
    tests: list[TestResult]
    runtime_error: str | None = None

    @property
    def failures(self) -> list[TestResult]:
        return [t for t in self.tests if t.status == "fail"]

    @property
    def passed(self) -> bool:
        return self.runtime_error is None and not self.failures and any(t.status == "pass" for t in self.tests)


@dataclass
class DiagRun:
    """One run of ``dcgmi diag``: ``outcome`` is pass, fail, error (it ran but gave no usable verdict) or
    unavailable (no DCGM on this node)."""

    level: int
    outcome: str
    message: str
    started_at: datetime
    finished_at: datetime
    exit_status: int | None = None
    result: DiagResult | None = None
    stdout: str = ""
    stderr: str = ""
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    summary: dict = field(default_factory=dict)  # `diag_summary`, set by `diagnose`


def normalize_status(value: Any) -> str:
    if not isinstance(value, str):
        return "unknown"
    return _STATUS.get(value.strip().lower(), "unknown")


def _text(value: Any) -> str:
    return str(value).strip()[:MAX_TEXT]


def _warnings(value: Any) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items[:8]:
        text = (item.get("warning") or item.get("message") or "") if isinstance(item, dict) else item
        if text:
            out.append(_text(text))
    return out


def _gpu_index(result: dict) -> list[int | None]:
    """The GPU(s) one result entry is about: 4.x ``entity_group``/``entity_id``, 3.x ``gpu_ids`` ("0" or "0,1")."""
    group = result.get("entity_group")
    if group is not None:
        if str(group).upper() != "GPU":
            return []  # a CPU or NvSwitch entity: not one of the node's GPUs
        entity = result.get("entity_id")
        return [int(entity)] if isinstance(entity, int) and not isinstance(entity, bool) and 0 <= entity < 4096 \
            else [None]
    ids = result.get("gpu_ids", result.get("gpu_id"))
    if ids is None:
        return [None]
    parts = [p.strip() for p in str(ids).split(",") if p.strip()]
    indexes = [int(p) for p in parts if p.isdigit() and int(p) < 4096]
    return indexes or [None]


def extract_document(text: str) -> dict:
    """The JSON object in dcgmi's output (3.x prints a banner line before it)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise DiagParseError("no JSON document in dcgmi's output")
    try:
        document = json.loads(text[start:end + 1])
    except ValueError as err:
        raise DiagParseError(f"dcgmi's JSON does not parse: {err}") from None
    if not isinstance(document, dict):
        raise DiagParseError("dcgmi's JSON is not an object")
    return document


def parse_diag(text: str) -> DiagResult:
    """``dcgmi diag -j`` output (either shape) → a `DiagResult`; DiagParseError if it is neither."""
    document = extract_document(text)
    root = document.get("DCGM Diagnostic", document.get("DCGM GPU Diagnostic"))
    if not isinstance(root, dict):
        raise DiagParseError("neither 'DCGM Diagnostic' (DCGM 4) nor 'DCGM GPU Diagnostic' (DCGM 2/3) in the output")
    metadata = document.get("metadata") if isinstance(document.get("metadata"), dict) else {}
    version = metadata.get("version") or root.get("version") or document.get("version")
    driver = (metadata.get("Driver Version Detected") or root.get("Driver Version Detected")
              or root.get("driver_version_detected") or document.get("Driver Version Detected"))
    runtime_error = root.get("runtime_error") or document.get("runtime_error")
    categories = root.get("test_categories")
    if categories is None and runtime_error is None:
        raise DiagParseError("no test_categories in the diagnostic document")
    tests: list[TestResult] = []
    for category in categories if isinstance(categories, list) else []:
        if not isinstance(category, dict):
            continue
        category_name = _text(category.get("category") or "")
        for test in category.get("tests") or []:
            if not isinstance(test, dict):
                continue
            name = _text(test.get("name") or "?")
            results = [r for r in test.get("results") or [] if isinstance(r, dict)]
            summary = test.get("test_summary") if isinstance(test.get("test_summary"), dict) else {}
            summary_warnings = _warnings(summary.get("warnings"))
            for result in results:
                status = normalize_status(result.get("status"))
                for index in _gpu_index(result):
                    tests.append(TestResult(category_name, name, status, index, _warnings(result.get("warnings"))))
            if not results and summary:  # a test known only by its summary
                tests.append(TestResult(category_name, name, normalize_status(summary.get("status")), None,
                                        summary_warnings))
            elif normalize_status(summary.get("status")) == "fail" and not any(
                    t.status == "fail" for t in tests if t.name == name and t.category == category_name):
                # DCGM 4 can fail a test in its summary alone (e.g. a node-wide check): keep that failure.
                tests.append(TestResult(category_name, name, "fail", None, summary_warnings))
    return DiagResult(str(version)[:64] if version else None, str(driver)[:64] if driver else None, tests,
                      _text(runtime_error) if runtime_error else None)


# -- running ------------------------------------------------------------------------------------------------------

Runner = Callable[[list[str], float], "subprocess.CompletedProcess | None"]


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout,
                              stdin=subprocess.DEVNULL, check=False)
    except (FileNotFoundError, PermissionError):
        return None
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
        return subprocess.CompletedProcess(argv, 124, out, f"timed out after {timeout:.0f} s")


def find_dcgmi(dcgmi: str = "dcgmi") -> str | None:
    return shutil.which(dcgmi)


def run_diag(level: int, *, dcgmi: str = "dcgmi", runner: Runner = _run,
             clock: Callable[[], datetime] = utc_now) -> DiagRun:
    """Run one diagnostic at ``level`` and judge it from its JSON."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}")
    started = clock()
    path = find_dcgmi(dcgmi)
    if path is None:
        return DiagRun(level, "unavailable", f"DCGM is not installed here ({dcgmi} not found); no diagnostic ran",
                       started, clock(), 127)
    begun = time.monotonic()
    proc = runner([path, "diag", "-r", str(level), "-j"], LEVEL_TIMEOUT_S[level])
    finished = clock()
    if proc is None:
        return DiagRun(level, "unavailable", f"{path} could not be started", started, finished, 126)
    stdout, stderr = proc.stdout or "", proc.stderr or ""
    try:
        result = parse_diag(stdout)
    except DiagParseError as err:
        detail = (stderr.strip() or stdout.strip())[-MAX_TEXT:]
        hint = ""
        if "host engine" in detail.lower() or "connect" in detail.lower():
            hint = " (is nv-hostengine running?)"
        return DiagRun(level, "error", f"dcgmi diag -r {level} gave no verdict (exit {proc.returncode}): {err}"
                       f"{'; ' + detail if detail else ''}{hint}", started, finished, proc.returncode,
                       stdout=stdout, stderr=stderr)
    took = time.monotonic() - begun
    failures = result.failures
    ran = sum(1 for t in result.tests if t.status in ("pass", "fail", "warn"))
    if result.runtime_error:
        outcome, message = "error", f"DCGM diagnostic level {level} could not run: {result.runtime_error}"
    elif failures:
        names = sorted({f"{t.name}" + (f" (GPU {t.gpu_index})" if t.gpu_index is not None else "") for t in failures})
        outcome = "fail"
        message = f"DCGM diagnostic level {level} failed: {', '.join(names)[:1000]}"
    elif ran == 0:
        outcome, message = "error", f"DCGM diagnostic level {level} ran no test (all skipped or not run)"
    else:
        skipped = sum(1 for t in result.tests if t.status in ("skip", "not_run"))
        outcome = "pass"
        message = (f"DCGM diagnostic level {level} passed ({ran} result(s)"
                   f"{f', {skipped} skipped' if skipped else ''}, {took:.0f} s)")
    return DiagRun(level, outcome, message, started, finished, proc.returncode, result, stdout, stderr)


# -- reporting ----------------------------------------------------------------------------------------------------

def diag_summary(run: DiagRun, gpus_by_index: dict[int, dict] | None = None) -> dict:
    """The compact, bounded summary the report's ``diag`` event carries in ``raw`` (and the action evidence)."""
    gpus_by_index = gpus_by_index or {}
    failures = []
    for test in (run.result.failures if run.result else [])[:MAX_FAILURES]:
        gpu = gpus_by_index.get(test.gpu_index) if test.gpu_index is not None else None
        failures.append({"category": test.category, "test": test.name, "gpu_index": test.gpu_index,
                         "gpu_uuid": (gpu or {}).get("uuid"), "pci_bus_id": (gpu or {}).get("pci_bus_id"),
                         "hardware": test.hardware, "warning": "; ".join(test.warnings)[:MAX_TEXT]})
    tests = sorted({t.name for t in run.result.tests}) if run.result else []
    summary = {"v": 1, "run": run.run_id, "level": run.level, "outcome": run.outcome,
               "dcgm_version": run.result.dcgm_version if run.result else None,
               "tests": tests[:64], "failures": failures}
    text = json.dumps(summary, separators=(",", ":"))
    while len(text) > RAW_LIMIT and summary["failures"]:
        summary["failures"] = summary["failures"][:-1]
        summary["truncated"] = True
        text = json.dumps(summary, separators=(",", ":"))
    return summary


def diag_event(run: DiagRun, gpus_by_index: dict[int, dict] | None = None) -> dict | None:
    """The report event for a run (kind ``diag``, code = level), or None when DCGM is not installed here."""
    if run.outcome == "unavailable":
        return None
    summary = diag_summary(run, gpus_by_index)
    failures = summary["failures"]
    if run.outcome == "fail":
        severity = "critical" if any(f["hardware"] for f in failures) else "warning"
    elif run.outcome == "error":
        severity = "warning"
    else:
        severity = "info"
    only = {f["gpu_uuid"] for f in failures}
    gpu_uuid = next(iter(only)) if len(only) == 1 else None
    message = run.message
    if failures:
        first = failures[0]
        message += f" — {first['test']}: {first['warning']}" if first["warning"] else ""
    return {"kind": "diag", "at": rfc3339(run.finished_at), "gpu_uuid": gpu_uuid, "pci_bus_id": None,
            "code": run.level, "severity": severity, "message": message[:4096],
            "raw": json.dumps(summary, separators=(",", ":"))}


def diagnose(level: int, *, dcgmi: str = "dcgmi", gpus_by_index: dict[int, dict] | None = None,
             sink: Callable[[dict], None] | None = None, runner: Runner = _run,
             clock: Callable[[], datetime] = utc_now) -> DiagRun:
    """Run a diagnostic, summarise it against the node's GPUs (DCGM's GPU ids are NVML's indexes) and hand its
    report event to ``sink`` (the agent's pending events, or the inbox `fleet-agent verify` writes)."""
    run = run_diag(level, dcgmi=dcgmi, runner=runner, clock=clock)
    run.summary = diag_summary(run, gpus_by_index)
    event = diag_event(run, gpus_by_index)
    if event is not None and sink is not None:
        sink(event)
    return run


def dcgm_presence(dcgmi: str = "dcgmi", runner: Runner = _run) -> dict:
    """Whether DCGM is installed and its host engine answers (for ``bench/nvml_real.py`` and verify)."""
    path = find_dcgmi(dcgmi)
    info: dict = {"dcgmi": path, "version": None, "hostengine_binary": shutil.which("nv-hostengine"),
                  "hostengine_reachable": None}
    if path is None:
        return info
    proc = runner([path, "--version"], 30)
    if proc is not None and proc.returncode == 0:
        for line in (proc.stdout or "").splitlines():
            if "version" in line.lower():
                info["version"] = line.split(":", 1)[-1].strip()[:64]
                break
    probe = runner([path, "discovery", "-l"], 30)
    info["hostengine_reachable"] = bool(probe is not None and probe.returncode == 0)
    return info


# -- the inbox: diagnostics `fleet-agent verify --level N` ran, for the running agent to report -------------------

INBOX_NAME = "diagnostics.inbox"
INBOX_MAX_BYTES = 1024 * 1024


def inbox_path(state_dir: str | os.PathLike) -> Path:
    return Path(state_dir) / INBOX_NAME


def append_inbox(path: Path, event: dict) -> None:
    """Leave one event for the running agent (one JSON line, under an exclusive lock)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        if fh.tell() < INBOX_MAX_BYTES:
            fh.write(json.dumps(event, separators=(",", ":")) + "\n")
            fh.flush()


def drain_inbox(path: Path) -> list[dict]:
    """Take every event in the inbox (emptying it); lines that are not events are skipped."""
    if not path.exists():
        return []
    with open(path, "r+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        lines = fh.read().splitlines()
        if not lines:
            return []
        fh.seek(0)
        fh.truncate()
    events = []
    for line in lines:
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict) and event.get("kind") == "diag":
                events.append(event)
    return events
