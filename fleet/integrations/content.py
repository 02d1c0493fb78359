"""What a message says: title, summary, the ticket body a provider's support desk can act on, the evidence
bundle, facts for structured fields and links to the console.

Rendered once, at a message's first try, and stored on the message: every retry sends the same content, and the
delivery log shows exactly what went out.

The provider ticket body follows what support desks ask for: the instance / server identity and region, the GPU
serials and UUIDs, the Xid / SXid / AER lines with their timestamps, driver and CUDA versions, the triage
checklist (what we already ruled out), and what we ask them to do.
"""

from __future__ import annotations

import json
from datetime import datetime

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.utils import timezone

from fleet.core.i18n import in_server_language
from fleet.health.choices import ActionKind, CheckStatus, XidAction
from fleet.health.models import Finding
from fleet.health.selectors.evidence import finding_evidence
from fleet.health.selectors.evidence_text import evidence_text
from fleet.health.selectors.triage import node_triage
from fleet.inventory.choices import DeliveryForm, Layer, Owner

from .choices import EventKind, TicketAction

PRODUCT = "GPU fleet"
CLOUD_FORMS = {DeliveryForm.CLOUD_SHARED, DeliveryForm.CLOUD_DEDICATED}


def console_url(path: str = "") -> str:
    base = (settings.FLEET_CONSOLE_URL or settings.FLEET_PUBLIC_URL or "").rstrip("/")
    return f"{base}{path}" if base else ""


def _jsonable(value):
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


def _when(value) -> str:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "—"


def _gpus(bundle: dict, gpu_index: int | None) -> list[dict]:
    return [g for g in bundle["gpus"] if gpu_index is None or g["index"] == gpu_index] or bundle["gpus"]


def _gpu_lines(gpus: list[dict]) -> list[str]:
    return [f"  GPU {g['index']}: {g['model'] or '?'} — serial {g['serial'] or 'unknown'}, UUID {g['uuid']}, "
            f"PCI {g['pci_bus_id'] or '?'}" + ("" if g["present"] else " (no longer visible)") for g in gpus]


def _ask(finding: Finding, node: dict, gpus: list[dict]) -> str:
    """What we ask the responsible party for, in one paragraph."""
    values = (finding.evidence or {}).get("values") or {}
    action = values.get("action") or ""
    cloud = node["delivery_form"] in CLOUD_FORMS
    target = (f"GPU {gpus[0]['index']}, serial {gpus[0]['serial'] or 'unknown'}" if len(gpus) == 1
              else "the affected GPU")
    if finding.action_kind == ActionKind.PROVIDER_TICKET and finding.layer in (Layer.HARDWARE, Layer.FACILITY):
        if cloud:
            return ("Please take the host of this instance out of service and move the instance to healthy "
                    "hardware (or replace the instance); confirm when done so we can verify it.")
        if action == XidAction.RESET_GPU:
            return (f"Please reset {target} (or power-cycle the server) and confirm it comes back healthy; if it "
                    f"fails again, replace the GPU.")
        if action == XidAction.REBOOT:
            return (f"Please power-cycle the server and confirm all GPUs come back ({target}); if it happens again, "
                    f"inspect the hardware and replace the GPU.")
        return (f"Please inspect the server and replace the faulty part ({target}); confirm the replacement and "
                f"its new serial number.")
    if finding.action_kind == ActionKind.VENDOR_RMA:
        return f"RMA request: please replace {target}; the evidence bundle is attached."
    return finding.recommended_action


def _checklist(node_id: int) -> list[str]:
    from fleet.inventory.models import Node

    node = Node.objects.get(pk=node_id)
    triage = node_triage(node=node)
    lines = []
    for step in triage["steps"]:
        mark = {CheckStatus.PASSED: "ruled out", CheckStatus.FAILED: "FAILED",
                CheckStatus.UNKNOWN: "unknown"}.get(step["status"], step["status"])
        lines.append(f"  {step['number']}. {step['title']}: {mark} — {step['reason']}")
    return lines


def finding_ticket_body(finding: Finding, bundle: dict) -> str:
    node = bundle["node"]
    values = (finding.evidence or {}).get("values") or {}
    gpu_index = finding.gpu.index if finding.gpu_id else values.get("gpu_index")
    gpus = _gpus(bundle, gpu_index)
    stack = (bundle["stack"] or {}).get("current") or {}
    baseline = (bundle["stack"] or {}).get("baseline") or {}
    lines = [finding.summary, ""]
    lines += ["Instance / server",
              f"  hostname: {node['hostname']}",
              f"  provider: {node['provider']}" + (f" (support: {node['provider_support_contact']})"
                                                   if node.get("provider_support_contact") else ""),
              f"  delivery form: {DeliveryForm(node['delivery_form']).label if node['delivery_form'] in DeliveryForm.values else node['delivery_form']}",  # noqa: E501
              f"  instance / server id: {node['instance_id'] or '—'}; machine id: {node['machine_id'] or '—'}",
              f"  instance type / server model: {node['instance_type'] or '—'}",
              f"  region: {node['region'] or '—'}; site: {node['site'] or '—'}; pool: {node['pool'] or '—'}", ""]
    lines += [f"Affected GPU{'s' if len(gpus) > 1 else ''}", *_gpu_lines(gpus), ""]
    log = bundle["kernel_log"]
    lines += ["Error log (UTC)"]
    lines += [f"  {_when(e['at'])} [{e['kind']}{' ' + str(e['code']) if e['code'] is not None else ''}] {e['line']}"
              for e in log[-30:]] or ["  no Xid / SXid / AER lines in the window"]
    lines += ["", "Software",
              f"  driver {stack.get('driver_version') or '?'}, CUDA (driver) {stack.get('cuda_driver_version') or '?'}"
              f", kernel {stack.get('kernel') or '?'}, OS {stack.get('os') or '?'}"]
    if baseline:
        lines.append(f"  baseline {baseline.get('name')}: driver {baseline.get('driver_version') or '—'}, "
                     f"CUDA {baseline.get('cuda_driver_version') or '—'}")
    lines += ["", "Triage already done (in order)", *_checklist(finding.node_id), ""]
    lines += ["What we ask for", f"  {_ask(finding, node, gpus)}", ""]
    lines += ["Timeline",
              f"  first seen {_when(finding.first_seen)}; finding opened {_when(finding.opened_at)}; "
              f"last seen {_when(finding.last_seen)}"]
    if finding.resolved_at:
        lines.append(f"  resolved {_when(finding.resolved_at)} ({finding.resolution})")
    lines += ["", f"Responsible: {Owner(finding.responsible_party).label if finding.responsible_party in Owner.values else finding.responsible_party}"  # noqa: E501
              f" ({finding.responsibility_source or 'default'} boundary). The full evidence bundle is attached."]
    link = console_url(f"/nodes/{finding.node_id}")
    if link:
        lines.append(f"Console: {link}")
    return "\n".join(lines) + "\n"


def _finding_facts(finding: Finding, bundle: dict) -> dict:
    node = bundle["node"]
    values = (finding.evidence or {}).get("values") or {}
    gpu_index = finding.gpu.index if finding.gpu_id else values.get("gpu_index")
    gpus = [g for g in bundle["gpus"] if gpu_index is None or g["index"] == gpu_index]
    stack = (bundle["stack"] or {}).get("current") or {}
    return {
        "finding_id": finding.pk, "rule": finding.rule.slug, "severity": finding.severity, "step": finding.step,
        "layer": finding.layer, "responsible_party": finding.responsible_party, "action_kind": finding.action_kind,
        "node_id": finding.node_id, "hostname": node["hostname"], "provider": node["provider"],
        "region": node["region"], "site": node["site"], "pool": node["pool"], "delivery_form": node["delivery_form"],
        "instance_id": node["instance_id"], "instance_type": node["instance_type"],
        "gpus": [{"index": g["index"], "serial": g["serial"], "uuid": g["uuid"], "pci_bus_id": g["pci_bus_id"]}
                 for g in gpus],
        "driver_version": stack.get("driver_version"), "cuda_driver_version": stack.get("cuda_driver_version"),
        "first_seen": finding.first_seen, "opened_at": finding.opened_at, "resolved_at": finding.resolved_at,
        "xid": values.get("code") if finding.rule.slug == "xid" else None,
    }


@in_server_language
def finding_content(*, finding: Finding, event_kind: str, action: str, now: datetime | None = None) -> dict:
    """The content of a message about one finding."""
    now = now or timezone.now()
    finding = Finding.objects.select_related("rule", "node", "gpu").get(pk=finding.pk)
    bundle = finding_evidence(finding=finding, now=now)
    node = bundle["node"]
    facts = _finding_facts(finding, bundle)
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    if event_kind == EventKind.FINDING_RESOLVED or action == TicketAction.RESOLVE:
        title = f"Resolved: {finding.rule.title} on {node['hostname']}"
        body = (f"{finding.summary}\n\nResolved {_when(finding.resolved_at)}: {finding.resolution or 'condition clear'}"
                f".\nFirst seen {_when(finding.first_seen)}, opened {_when(finding.opened_at)}.\n")
        return _jsonable({"title": title, "summary": f"Resolved: {finding.summary}", "body": body,
                          "severity": finding.severity, "facts": facts, "links": _links(finding), "evidence": None,
                          "evidence_text": "", "attachment_name": ""})
    title = f"[{finding.severity.upper()}] {finding.rule.title} on {node['hostname']}"
    if action == TicketAction.UPDATE:
        title = f"Again: {finding.rule.title} on {node['hostname']}"
    return _jsonable({
        "title": title, "summary": finding.summary, "body": finding_ticket_body(finding, bundle),
        "severity": finding.severity, "facts": facts, "links": _links(finding), "evidence": bundle,
        "evidence_text": evidence_text(bundle),
        "attachment_name": f"evidence-{node['hostname']}-finding-{finding.pk}-{stamp}",
    })


def _links(finding: Finding) -> dict:
    node_link = console_url(f"/nodes/{finding.node_id}")
    return {"node": node_link} if node_link else {}


def test_content(*, integration_name: str, now: datetime) -> dict:
    body = (f"This is a test message from {PRODUCT} for the integration “{integration_name}”, sent "
            f"{_when(now)}. Nothing needs to be done.\n")
    return {"title": f"{PRODUCT}: test message", "summary": f"Test message for {integration_name}", "body": body,
            "severity": "info", "facts": {"test": True}, "links": {}, "evidence": None, "evidence_text": "",
            "attachment_name": ""}


def acknowledgement_content(*, ticket, event: dict, now: datetime) -> dict:
    who, note = event.get("acknowledged_by") or "an operator", event.get("note") or ""
    summary = f"Acknowledged by {who} in {PRODUCT}" + (f": {note}" if note else "")
    return {"title": f"Acknowledged: {ticket.title or ticket.key}", "summary": summary, "body": summary + "\n",
            "severity": "info", "facts": {"ticket": ticket.key, "acknowledged_by": who}, "links": {},
            "evidence": None, "evidence_text": "", "attachment_name": ""}
