"""What a rule is: a definition (step, layer, severity, durations, parameters) plus a check over one node's facts.

A check returns the subjects for which its condition is true right now (a list of `Observation`, possibly
empty), or `None` when it cannot tell (the data it needs is missing). "Cannot tell" never opens or resolves
anything; the evaluation service keeps the previous state. Checks are pure functions over facts loaded in
bulk (`fleet.health.services.facts`), so they never touch the database.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Q

from ..choices import Scope

PARAM_KINDS = ("number", "integer", "boolean", "string_list")


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None

    def clean(self, value: Any) -> Any:
        """The value in its canonical type, or ValueError with a message an operator understands."""
        if self.kind == "boolean":
            if not isinstance(value, bool):
                raise ValueError("Must be true or false.")
            return value
        if self.kind == "string_list":
            if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
                raise ValueError("Must be a list of non-empty strings.")
            return list(value)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"Must be a {'whole ' if self.kind == 'integer' else ''}number.")
        if self.kind == "integer":
            if value != int(value):
                raise ValueError("Must be a whole number.")
            value = int(value)
        else:
            value = float(value)
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"Must be ≥ {self.minimum:g}.")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"Must be ≤ {self.maximum:g}.")
        return value

    def describe(self) -> dict:
        return {"name": self.name, "kind": self.kind, "default": self.default, "help": self.help,
                "minimum": self.minimum, "maximum": self.maximum}


@dataclass(frozen=True)
class Explains:
    """This rule's open finding explains open findings of `rules`: they are its consequences, or it is the more
    specific reading of the same fault. The triage headline then names this finding, and lists the others as
    explained by it.

    * `same_gpu` (default): only findings on the same GPU (a node-wide explaining finding explains them all);
      False: every such finding on the node.
    * `when_critical`: only while the explaining finding is critical (a hung process is a consequence of a
      critical hardware fault, not of a warning).
    * `subjects`: only findings whose subject ends with one of these (`":xid:63"`: that Xid of the rule `xid`).
    """

    rules: tuple[str, ...]
    same_gpu: bool = True
    when_critical: bool = False
    subjects: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {"rules": list(self.rules), "same_gpu": self.same_gpu, "when_critical": self.when_critical,
                "subjects": list(self.subjects)}


@dataclass
class Observation:
    """One subject for which a rule's condition is true now, with the evidence behind it."""

    summary: str
    subject: str = "node"
    gpu_id: int | None = None
    values: dict = field(default_factory=dict)
    since: datetime | None = None
    severity: str | None = None
    layer: str | None = None
    remedy: str | None = None
    log_lines: list[dict] = field(default_factory=list)
    xid_policy_version: int | None = None
    # None: the definition's `explains`; a tuple (possibly empty) replaces it for this subject.
    explains: tuple[Explains, ...] | None = None
    # The fault is past its escalation threshold: the remedy is the escalated action, routing says it as such.
    escalated: bool = False


Check = Callable[..., "list[Observation] | None"]


@dataclass(frozen=True)
class RuleDefinition:
    slug: str
    title: str
    step: str
    layer: str
    severity: str
    scope: str
    duration_s: int
    clear_hold_s: int
    check: Check
    description: str = ""
    remedy: str = ""
    params: tuple[Param, ...] = ()
    # GPU rules: a SQL prefilter on GPUStatus, so only candidate rows are loaded (must be a superset of the check).
    gpu_candidates: Callable[[dict], Q] | None = None
    # Bit-mask annotations the prefilter refers to: name → (GPUStatus field, mask).
    gpu_annotations: dict[str, tuple[str, int]] = field(default_factory=dict)
    needs_report: bool = True
    needs_nvml: bool = False
    # Only candidate GPU rows can make it true: skip nodes without any (set by `gpu_rule`).
    candidates_only: bool = False
    # The provider acted on purpose (a spot reclaim): route to the layer's owner but never ask for a ticket.
    provider_initiated: bool = False
    # Findings of other rules this rule's findings explain (optional; see `Explains`, docs/health.md).
    explains: tuple[Explains, ...] = ()
    # Optional: called once per cycle before the checks with every loaded node's facts, the rule's fleet-wide
    # params, the context and whether the cycle is scoped to some nodes; puts fleet aggregates (per site, …)
    # into `ctx.memo` for the check. Must not query the database.
    prepare: Callable[..., None] | None = None

    def default_params(self) -> dict:
        return {p.name: p.default for p in self.params}

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def clean_params(self, values: Any, *, partial: bool = True) -> tuple[dict, dict[str, list[str]]]:
        """Validate parameter values; returns (cleaned, errors keyed `params.<name>`)."""
        if not isinstance(values, dict):
            return {}, {"params": ["Must be an object of parameter names to values."]}
        cleaned, errors = {}, {}
        for name, value in values.items():
            spec = self.param(name)
            if spec is None:
                known = ", ".join(p.name for p in self.params) or "none"
                errors[f"params.{name}"] = [f"Unknown parameter for rule {self.slug}; known: {known}."]
                continue
            try:
                cleaned[name] = spec.clean(value)
            except ValueError as exc:
                errors[f"params.{name}"] = [str(exc)]
        if not partial:
            for spec in self.params:
                cleaned.setdefault(spec.name, spec.default)
        return cleaned, errors


def gpu_subject(gpu_id: int) -> str:
    return f"gpu:{gpu_id}"


def gpu_label(row: dict) -> str:
    index = row.get("gpu_index")
    return f"GPU {index}" if index is not None else f"GPU {row.get('gpu_pci_bus_id') or row.get('gpu_id')}"


def per_gpu(check_gpu: Callable[..., Observation | None], *, with_ctx: bool = False) -> Check:
    """Turn a check of one GPU status row into a node check over the node's candidate GPU rows (`with_ctx`: the
    GPU check also takes the cycle's context, e.g. to read the Xid policy table)."""

    def check(node, params, ctx) -> list[Observation]:
        found = []
        for row in node.candidate_gpus:
            observation = check_gpu(row, node, params, ctx) if with_ctx else check_gpu(row, node, params)
            if observation is not None:
                observation.subject = gpu_subject(row["gpu_id"])
                observation.gpu_id = row["gpu_id"]
                observation.values.setdefault("gpu_index", row.get("gpu_index"))
                observation.values.setdefault("gpu_uuid", row.get("gpu_uuid"))
                observation.values.setdefault("pci_bus_id", row.get("gpu_pci_bus_id"))
                found.append(observation)
        return found

    check.__name__ = getattr(check_gpu, "__name__", "check")
    return check


def node_rule(**kwargs) -> RuleDefinition:
    return RuleDefinition(scope=Scope.NODE, **kwargs)


def gpu_rule(*, check_gpu, with_ctx: bool = False, **kwargs) -> RuleDefinition:
    return RuleDefinition(scope=Scope.GPU, check=per_gpu(check_gpu, with_ctx=with_ctx), candidates_only=True,
                          **kwargs)


# Findings that follow from a critical hardware fault on their GPU: a process hung on the broken GPU keeps its
# memory (issue: "a hung process holding GPU memory on a GPU that already has a critical hardware fault is a
# consequence, not the cause").
HUNG_ON_BROKEN_GPU = Explains(("residual_gpu_processes", "gpu_memory_pressure"), when_critical=True)
# The rules that read a GPU's ECC counters; an ECC Xid (48, 63, 64, 94, 95, …) is the more specific reading of
# the same fault, because it says whether the error was contained.
ECC_COUNTER_RULES = ("ecc_uncorrectable", "pending_page_retirement", "row_remap_failure")
# Symptoms an announced event explains on the whole node: the GPUs go, the node falls silent, the driver stops.
DISRUPTION_SYMPTOMS = ("gpu_lost", "gpu_count_low", "node_silent", "nvml_unavailable", "xid", "xid_escalation",
                       "sxid_fatal", "residual_gpu_processes")


def pct(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f} %"
