"""Plain-text form of an evidence bundle, for pasting into a provider's ticket."""

import json
from datetime import datetime


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
        f"  state {finding['state']}, severity {finding['severity']}, step {finding['step']}, layer {finding['layer']}",
        f"  responsible: {finding['responsible_party']} ({finding['responsibility_source'] or 'default'} boundary)",
        f"  next action: {finding['recommended_action']}",
        f"  first seen {_when(finding['first_seen'])}, opened {_when(finding['opened_at'])}, "
        f"last seen {_when(finding['last_seen'])}"
        + (f", resolved {_when(finding['resolved_at'])} ({finding['resolution']})" if finding["resolved_at"] else ""),
    ]
    if finding.get("xid_policy_version"):
        lines.append(f"  Xid policy table version {finding['xid_policy_version']}")
    values = (finding.get("evidence") or {}).get("values") or {}
    for key, value in values.items():
        lines.append(f"  {key}: {_value(value)}")
    for line in (finding.get("evidence") or {}).get("log_lines") or []:
        lines.append(f"  log {line.get('at')}: {line.get('line')}")
    return lines


def evidence_text(bundle: dict) -> str:
    node = bundle["node"]
    title = f"finding #{bundle['finding']['id']}" if bundle.get("kind") == "finding" else "node"
    out = [f"Evidence bundle ({title}) — {node['hostname']}", f"Generated {_when(bundle['generated_at'])}"]

    if bundle.get("kind") == "finding":
        out += _section("Finding") + _finding_lines(bundle["finding"])
    else:
        out += _section(f"Open findings ({len(bundle.get('findings') or [])})")
        for finding in bundle.get("findings") or []:
            out += _finding_lines(finding)
        if not bundle.get("findings"):
            out.append("none")

    out += _section("Node")
    out += [f"{key}: {_value(value)}" for key, value in node.items()]

    out += _section("Responsibility boundary")
    out += [f"{cell['layer']:<15} {cell['owner']:<16} ({cell['source']}{': ' + cell['note'] if cell['note'] else ''})"
            for cell in bundle["boundary"]]

    out += _section("Latest status")
    status = bundle.get("status")
    if status:
        out += [f"{key}: {_value(value)}" for key, value in status.items() if key not in ("system", "cloud")]
        out.append(f"cloud: {_value(status.get('cloud'))}")
    else:
        out.append("the node has never reported")

    out += _section("nvidia-smi (rebuilt)") + bundle["nvidia_smi"].splitlines()

    out += _section("GPUs")
    for gpu in bundle["gpus"]:
        out.append(f"GPU {gpu['index']}: {gpu['model']} uuid {gpu['uuid']} serial {gpu['serial'] or '—'} "
                   f"bus {gpu['pci_bus_id']} cc {gpu['compute_capability'] or '—'}"
                   + ("" if gpu["present"] else " (no longer present)"))
        status_row = gpu.get("status") or {}
        if status_row:
            out.append("  " + ", ".join(f"{k}={_value(v)}" for k, v in status_row.items()
                                        if k not in ("processes",) and v not in (None, [], "")))

    out += _section(f"Kernel log ({len(bundle['kernel_log'])} lines)")
    out += [f"{_when(e['at'])} [{e['kind']}{' ' + str(e['code']) if e['code'] is not None else ''}] {e['line']}"
            for e in bundle["kernel_log"]] or ["no relevant lines"]

    out += _section("Software stack")
    stack = bundle["stack"]
    current = stack.get("current")
    out += [f"{key}: {_value(value)}" for key, value in (current or {}).items()] or ["no stack reported"]
    if stack.get("baseline"):
        out.append(f"baseline: {stack['baseline']['name']}")
        out += [f"  drift {d['field']}: pinned {_value(d['expected'])}, actual {_value(d['actual'])}"
                for d in stack.get("drift") or []] or ["  no drift"]

    out += _section("Recent changes")
    out += [f"{_when(c['at'])} {c['summary']}" for c in bundle["changes"]] or ["none recorded"]
    return "\n".join(out) + "\n"
