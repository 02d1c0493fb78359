"""Plain-text form of an evidence bundle, for pasting into a provider's ticket.

Its labels are in the active language (the request's; English in workers and tickets); keys, values and log
lines are the node's own and stay as they are."""

import json
from datetime import datetime

from django.utils.translation import gettext as _


def _when(value) -> str:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S UTC")
    return "—" if value in (None, "") else str(value)


def _value(value) -> str:
    if isinstance(value, datetime):
        return _when(value)
    if isinstance(value, dict | list):
        return json.dumps(value, default=str, ensure_ascii=False)
    return "—" if value in (None, "") else str(value)


def _section(title: str) -> list[str]:
    return ["", f"== {title} " + "=" * max(0, 70 - len(title))]


def _finding_lines(finding: dict) -> list[str]:
    lines = [
        f"#{finding['id']} {finding['rule']} — {finding['summary']}",
        "  " + _("state {state}, severity {severity}, step {step}, layer {layer}").format(
            state=finding["state"], severity=finding["severity"], step=finding["step"], layer=finding["layer"]),
        "  " + _("responsible: {party} ({source} boundary)").format(
            party=finding["responsible_party"], source=finding["responsibility_source"] or "default"),
        "  " + _("next action: {action}").format(action=finding["recommended_action"]),
        "  " + _("first seen {first_seen}, opened {opened}, last seen {last_seen}").format(
            first_seen=_when(finding["first_seen"]), opened=_when(finding["opened_at"]),
            last_seen=_when(finding["last_seen"]))
        + (_(", resolved {at} ({resolution})").format(at=_when(finding["resolved_at"]),
                                                       resolution=finding["resolution"])
           if finding["resolved_at"] else ""),
    ]
    if finding.get("xid_policy_version"):
        lines.append("  " + _("Xid policy table version {version}").format(version=finding["xid_policy_version"]))
    values = (finding.get("evidence") or {}).get("values") or {}
    for key, value in values.items():
        lines.append(f"  {key}: {_value(value)}")
    for line in (finding.get("evidence") or {}).get("log_lines") or []:
        lines.append(f"  log {line.get('at')}: {line.get('line')}")
    return lines


def evidence_text(bundle: dict) -> str:
    node = bundle["node"]
    title = _("finding #{id}").format(id=bundle["finding"]["id"]) if bundle.get("kind") == "finding" else _("node")
    out = [_("Evidence bundle ({title}) — {hostname}").format(title=title, hostname=node["hostname"]),
           _("Generated {at}").format(at=_when(bundle["generated_at"]))]

    if bundle.get("kind") == "finding":
        out += _section(_("Finding")) + _finding_lines(bundle["finding"])
    else:
        out += _section(_("Open findings ({count})").format(count=len(bundle.get("findings") or [])))
        for finding in bundle.get("findings") or []:
            out += _finding_lines(finding)
        if not bundle.get("findings"):
            out.append(_("none"))

    out += _section(_("Node"))
    out += [f"{key}: {_value(value)}" for key, value in node.items()]

    out += _section(_("Responsibility boundary"))
    out += [f"{cell['layer']:<15} {cell['owner']:<16} ({cell['source']}{': ' + cell['note'] if cell['note'] else ''})"
            for cell in bundle["boundary"]]

    out += _section(_("Latest status"))
    status = bundle.get("status")
    if status:
        out += [f"{key}: {_value(value)}" for key, value in status.items() if key not in ("system", "cloud")]
        out.append(f"cloud: {_value(status.get('cloud'))}")
    else:
        out.append(_("the node has never reported"))

    out += _section(_("nvidia-smi (rebuilt)")) + bundle["nvidia_smi"].splitlines()

    out += _section(_("GPUs"))
    for gpu in bundle["gpus"]:
        out.append(f"GPU {gpu['index']}: {gpu['model']} uuid {gpu['uuid']} serial {gpu['serial'] or '—'} "
                   f"bus {gpu['pci_bus_id']} cc {gpu['compute_capability'] or '—'}"
                   + ("" if gpu["present"] else " " + _("(no longer present)")))
        status_row = gpu.get("status") or {}
        if status_row:
            out.append("  " + ", ".join(f"{k}={_value(v)}" for k, v in status_row.items()
                                        if k not in ("processes",) and v not in (None, [], "")))

    out += _section(_("Kernel log ({count} lines)").format(count=len(bundle["kernel_log"])))
    out += [f"{_when(e['at'])} [{e['kind']}{' ' + str(e['code']) if e['code'] is not None else ''}] {e['line']}"
            for e in bundle["kernel_log"]] or [_("no relevant lines")]

    out += _section(_("Software stack"))
    stack = bundle["stack"]
    current = stack.get("current")
    out += [f"{key}: {_value(value)}" for key, value in (current or {}).items()] or [_("no stack reported")]
    if stack.get("baseline"):
        out.append(_("baseline: {name}").format(name=stack["baseline"]["name"]))
        out += ["  " + _("drift {field}: pinned {expected}, actual {actual}").format(
            field=d["field"], expected=_value(d["expected"]), actual=_value(d["actual"]))
                for d in stack.get("drift") or []] or ["  " + _("no drift")]

    out += _section(_("Recent changes"))
    out += [f"{_when(c['at'])} {c['summary']}" for c in bundle["changes"]] or [_("none recorded")]
    return "\n".join(out) + "\n"
