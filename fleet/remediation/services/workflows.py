"""Workflows as data: validation of the step list, and edits (refused while an open incident runs it)."""

from __future__ import annotations

from django.db import transaction

from fleet.core.api.errors import DomainError
from fleet.core.audit import audit_context

from ..choices import OPEN_STATES, OnFailure, StepKind
from ..models import MAX_TIMEOUT_S, Incident, Workflow

MAX_STEPS = 50
STEP_KEYS = {"kind", "title", "params", "timeout_s", "requires_approval", "on_failure"}
ON_FAILURE_KEYS = {"action", "max_attempts", "backoff_s", "workflow"}
PARTIES = ["provider", "vendor", "us"]
WAITING_PARTIES = ["provider", "vendor", "operator", "platform_team"]
UNTIL = ["operator", "gpu_serial_changed"]
# Parameters each kind understands: name → (type, allowed values or None).
PARAMS: dict[str, dict[str, tuple[type, list | None]]] = {
    StepKind.OPEN_TICKET: {"party": (str, PARTIES), "ask": (str, None)},
    StepKind.AWAIT_EXTERNAL: {"waiting_on": (str, WAITING_PARTIES), "until": (str, UNTIL)},
    StepKind.VERIFY: {"target": (str, ["node", "replacement"])},
    # level 1 (quick), 2 (after a failed job), 3 (long, before closing an RMA); require_dcgm: a node without DCGM
    # fails the gate instead of passing it with "not installed".
    StepKind.RUN_DIAGNOSTICS: {"level": (int, [1, 2, 3]), "target": (str, ["node", "replacement"]),
                               "require_dcgm": (bool, None)},
    StepKind.REQUEST_REPLACEMENT: {"same_pool": (bool, None)},
    StepKind.ROLLBACK_STACK: {"to": (str, ["baseline"])},
    StepKind.CHECKPOINT: {"before_notice_deadline": (bool, None)},
    StepKind.DRAIN: {"before_notice_deadline": (bool, None)},
    StepKind.RESET_GPU: {"gpu_index": (int, None)},
    StepKind.RMA: {"gpu_index": (int, None)},
}


def _is(value, kind: type) -> bool:
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _int_in(value, low: int, high: int) -> bool:
    return _is(value, int) and low <= value <= high


def workflow_steps_clean(steps, *, own_slug: str | None = None) -> tuple[list[dict], dict[str, list[str]]]:
    """Validate and normalise a step list; errors are keyed `steps[i].field`."""
    errors: dict[str, list[str]] = {}
    if not isinstance(steps, list) or not steps:
        return [], {"steps": ["A non-empty list of steps."]}
    if len(steps) > MAX_STEPS:
        return [], {"steps": [f"At most {MAX_STEPS} steps."]}
    known_workflows = set(Workflow.objects.values_list("slug", flat=True))
    cleaned = []
    for i, raw in enumerate(steps):
        path = f"steps[{i}]"
        if not isinstance(raw, dict):
            errors[path] = ["Expected an object with kind, params, timeout_s, on_failure."]
            continue
        for key in sorted(set(raw) - STEP_KEYS):
            errors[f"{path}.{key}"] = [f"Unknown key; allowed: {', '.join(sorted(STEP_KEYS))}."]
        kind = raw.get("kind")
        if kind not in StepKind.values:
            errors[f"{path}.kind"] = [f"Unknown step kind {kind!r}; one of {', '.join(StepKind.values)}."]
        title = raw.get("title", "")
        if not isinstance(title, str) or len(title) > 200:
            errors[f"{path}.title"] = ["Text of at most 200 characters."]
        params = raw.get("params", {})
        if not isinstance(params, dict):
            errors[f"{path}.params"] = ["An object."]
            params = {}
        allowed = PARAMS.get(kind, {})
        for name, value in params.items():
            spec = allowed.get(name)
            if spec is None:
                names = ", ".join(sorted(allowed)) or "none"
                errors[f"{path}.params.{name}"] = [f"Unknown parameter for {kind}; allowed: {names}."]
            elif not _is(value, spec[0]) or (spec[1] is not None and value not in spec[1]):
                expected = f"one of {', '.join(map(str, spec[1]))}" if spec[1] else f"a {spec[0].__name__}"
                errors[f"{path}.params.{name}"] = [f"Expected {expected}."]
        timeout = raw.get("timeout_s")
        if timeout is not None and not _int_in(timeout, 1, MAX_TIMEOUT_S):
            errors[f"{path}.timeout_s"] = [f"Seconds between 1 and {MAX_TIMEOUT_S}, or null for no timeout."]
        approval = raw.get("requires_approval", False)
        if not isinstance(approval, bool):
            errors[f"{path}.requires_approval"] = ["true or false."]
        on_failure = raw.get("on_failure") or {"action": OnFailure.WAIT}
        on_failure = _on_failure_clean(on_failure, f"{path}.on_failure", errors, known_workflows, own_slug)
        cleaned.append({"kind": kind, "title": title or "", "params": params, "timeout_s": timeout,
                        "requires_approval": approval, "on_failure": on_failure})
    return cleaned, errors


def _on_failure_clean(value, path: str, errors: dict, known: set[str], own_slug: str | None) -> dict:
    if not isinstance(value, dict):
        errors[path] = ["An object such as {\"action\": \"retry\", \"max_attempts\": 3, \"backoff_s\": 60}."]
        return {"action": OnFailure.WAIT}
    for key in sorted(set(value) - ON_FAILURE_KEYS):
        errors[f"{path}.{key}"] = [f"Unknown key; allowed: {', '.join(sorted(ON_FAILURE_KEYS))}."]
    action = value.get("action")
    if action not in OnFailure.values:
        errors[f"{path}.action"] = [f"One of {', '.join(OnFailure.values)}."]
        return {"action": OnFailure.WAIT}
    out = {"action": action}
    if action == OnFailure.RETRY:
        attempts, backoff = value.get("max_attempts", 3), value.get("backoff_s", 60)
        if not _int_in(attempts, 2, 10):
            errors[f"{path}.max_attempts"] = ["Between 2 and 10 (the first try counts)."]
        if not _int_in(backoff, 1, 86400):
            errors[f"{path}.backoff_s"] = ["Seconds between 1 and 86400; doubled after each attempt."]
        out.update(max_attempts=attempts, backoff_s=backoff)
    elif action == OnFailure.ESCALATE:
        target = value.get("workflow")
        if not isinstance(target, str) or target not in known:
            errors[f"{path}.workflow"] = [f"Unknown workflow {target!r}."]
        elif target == own_slug:
            errors[f"{path}.workflow"] = ["A workflow cannot escalate to itself."]
        out["workflow"] = target
    return out


def open_incidents_running(workflow: Workflow) -> list[str]:
    return list(Incident.objects.filter(workflow=workflow, state__in=sorted(OPEN_STATES))
                .order_by("pk").values_list("key", flat=True)[:20])


def workflow_save(*, data: dict, actor, workflow: Workflow | None = None) -> Workflow:
    """Create or change a workflow from validated data. Changing the steps of a workflow that an open incident
    runs is refused (409, naming the incidents): finish or cancel them, or create a new workflow."""
    with transaction.atomic():
        if workflow is not None:
            workflow = Workflow.objects.select_for_update().get(pk=workflow.pk)
        steps_change = "steps" in data and (workflow is None or data["steps"] != workflow.steps)
        if workflow is not None and (steps_change or data.get("urgent", workflow.urgent) != workflow.urgent):
            running = open_incidents_running(workflow)
            if running:
                raise DomainError(
                    f"Workflow {workflow.slug} is running in {len(running)} open incident(s) "
                    f"({', '.join(running)}); finish or cancel them, or create a new workflow.",
                    code="workflow_in_use", fields={"steps": [f"in use by {', '.join(running)}"]})
        if workflow is None:
            workflow = Workflow(slug=data["slug"], built_in=False, version=1)
        elif steps_change:
            workflow.version += 1
        for name in ("name", "description", "steps", "urgent", "enabled"):
            if name in data:
                setattr(workflow, name, data[name])
        with audit_context(actor=actor, note=f"workflow {workflow.slug} v{workflow.version}"):
            workflow.save()
    return workflow
