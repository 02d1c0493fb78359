"""What the control plane itself checks before a node returns to service (after the executor's `verify` —
today the operator running `fleet-agent verify` — passed):

* the node reported after the verify step started (it is up and its agent talks to us);
* its software stack matches its baseline (node baseline, else the pool's);
* no critical finding has been open on it for the pool's quiet period (findings an operator marked healthy
  do not count).

Engine-side completion checks for `await_external` live here too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from django.db.models import Q

from fleet.health.choices import FindingState, Severity
from fleet.health.models import Finding
from fleet.inventory.models import Node
from fleet.inventory.selectors import node_drift
from fleet.telemetry.models import ChangeLogEntry, NodeStatus

from .overrides import suppressed_finding_ids


@dataclass(frozen=True)
class Gate:
    name: str
    ok: bool
    detail: str

    def as_dict(self) -> dict:
        return asdict(self)


def verification_gates(*, node: Node, since: datetime, quiet_period_s: int, now: datetime) -> list[Gate]:
    gates = []
    status = NodeStatus.objects.filter(node=node).values("received_at", "silent").first()
    if status is None:
        gates.append(Gate("reporting", False, f"{node.hostname} has not reported yet"))
    elif status["silent"]:
        gates.append(Gate("reporting", False, f"{node.hostname} is silent"))
    elif status["received_at"] < since:
        gates.append(Gate("reporting", False, f"no report from {node.hostname} since the check started "
                                              f"({since:%H:%M:%S} UTC)"))
    else:
        gates.append(Gate("reporting", True, f"last report {status['received_at']:%H:%M:%S} UTC"))

    drift = node_drift(node=Node.objects.select_related("current_stack").get(pk=node.pk))
    if drift["baseline"] is None:
        gates.append(Gate("baseline", True, "no baseline pinned for this node or its pool"))
    elif drift["drifted"]:
        fields = ", ".join(f"{d['field']} {d['actual']} (expected {d['expected']})" for d in drift["drift"][:5])
        gates.append(Gate("baseline", False, f"stack differs from baseline {drift['baseline'].name}: {fields}"))
    else:
        gates.append(Gate("baseline", True, f"stack matches baseline {drift['baseline'].name}"))

    quiet_start = now - timedelta(seconds=quiet_period_s)
    critical = list(Finding.objects.filter(node=node, severity=Severity.CRITICAL)
                    .filter(Q(state=FindingState.OPEN) | Q(resolved_at__gt=quiet_start)).select_related("rule"))
    suppressed = suppressed_finding_ids(critical, now=now)
    critical = [f for f in critical if f.pk not in suppressed]
    open_now = [f for f in critical if f.state == FindingState.OPEN]
    if open_now:
        names = ", ".join(sorted({f.rule.slug for f in open_now}))
        gates.append(Gate("quiet", False, f"{len(open_now)} critical finding(s) open: {names}"))
    elif critical:
        last = max(f.resolved_at for f in critical)
        gates.append(Gate("quiet", False, f"a critical finding resolved at {last:%H:%M:%S} UTC, less than the quiet "
                                          f"period ({quiet_period_s} s) ago"))
    else:
        gates.append(Gate("quiet", True, f"no critical finding in the last {quiet_period_s} s"))
    return gates


def gpu_serial_changed(*, node_id: int, gpu_index: int | None, since: datetime) -> ChangeLogEntry | None:
    """The change-log entry that shows a new serial (a swapped GPU) on the node since `since`."""
    changes = ChangeLogEntry.objects.filter(node_id=node_id, at__gte=since, field__startswith="gpus[",
                                            field__endswith="].serial")
    if gpu_index is not None:
        changes = changes.filter(field=f"gpus[{gpu_index}].serial")
    return changes.order_by("at", "pk").first()
