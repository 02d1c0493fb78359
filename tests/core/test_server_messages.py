"""Key parity of the server's texts (issue #18): every message id the code can show is translated to Simplified
Chinese with the same placeholders, the catalogue holds nothing stale, and the committed .mo is the .po compiled.

Message ids come from two places:
* literals at call sites — `Msg("…")`, `_("…")`, `gettext("…")` … found by scanning `fleet/**/*.py`; a call whose
  id is not a string literal fails the scan (it could never be extracted);
* texts walked at runtime — the rule definitions' titles, descriptions, remedies and parameter help, the choice
  labels the server puts into sentences (layers, owners, delivery forms, triage steps, NVML states) and the seeded
  Xid catalogue. Those reach the renderer through `Msg.known(...)` and `catalogue_text(...)`.
"""

from __future__ import annotations

import ast
import gettext as pygettext
import io
import re
import struct
from pathlib import Path

import pytest

from fleet.core.i18n import SEPARATORS, placeholders

ROOT = Path(__file__).resolve().parents[2]
LOCALE = ROOT / "fleet" / "locale"
PO = LOCALE / "zh_Hans" / "LC_MESSAGES" / "django.po"
MO = PO.with_suffix(".mo")

TRANSLATION_CALLS = {"Msg", "_", "gettext", "gettext_lazy", "gettext_noop", "pgettext", "pgettext_lazy",
                     "ngettext", "ngettext_lazy", "npgettext", "npgettext_lazy"}
# The renderers themselves look ids up from stored messages and the registry (walked in `runtime_msgids`).
RENDERERS = {"fleet/core/i18n.py", "fleet/health/texts.py"}


def _call_name(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and func.attr != "known":
        return func.attr
    return None


def scan_msgids() -> tuple[dict[str, list[str]], list[str]]:
    """msgid → ["file:line", …] for every literal id; and the call sites whose id is not a literal."""
    found: dict[str, list[str]] = {}
    problems: list[str] = []
    for path in sorted((ROOT / "fleet").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative in RENDERERS or "/migrations/" in relative:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=relative)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or _call_name(node) not in TRANSLATION_CALLS:
                continue
            name = _call_name(node)
            where = f"{relative}:{node.lineno}"
            if name == "Msg" and isinstance(node.func, ast.Attribute):
                continue  # Msg.known and friends: runtime ids
            count = 2 if name.startswith(("ngettext", "npgettext")) else 1
            start = 1 if name.startswith(("pgettext", "npgettext")) else 0
            args = node.args[start:start + count]
            if len(args) < count or not all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in args):
                problems.append(f"{where}: {name}(...) needs a string literal as its message id")
                continue
            for arg in args:
                found.setdefault(arg.value, []).append(where)
    return found, problems


def runtime_msgids() -> dict[str, str]:
    """msgid → where it comes from, for texts the code passes through `Msg.known` / `catalogue_text`."""
    from fleet.health.choices import TriageStep
    from fleet.health.rules.catalog import RULES
    from fleet.inventory.choices import DeliveryForm, Layer, Owner
    from fleet.telemetry.choices import NvmlStatus

    ids: dict[str, str] = {sep: "fleet.core.i18n.SEPARATORS" for sep in SEPARATORS}
    for rule in RULES:
        for kind, text in (("title", rule.title), ("description", rule.description), ("remedy", rule.remedy)):
            if text:
                ids[text] = f"rule {rule.slug} {kind}"
        for param in rule.params:
            ids[param.help] = f"rule {rule.slug} param {param.name}"
    for value, label in Layer.choices:
        ids[label.lower()] = f"layer {value} (in a sentence)"
    for value, label in Owner.choices:
        ids[label.lower()] = f"owner {value} (in a sentence)"
    for value, label in DeliveryForm.choices:
        ids[label] = f"delivery form {value}"
    for value, label in TriageStep.choices:
        ids[label] = f"triage step {value}"
    for value, label in NvmlStatus.choices:
        ids[label] = f"NVML status {value}"
    ids.update(xid_catalogue_msgids())
    return ids


def xid_catalogue_msgids() -> dict[str, str]:
    """The seeded Xid policy texts as `policy_remedy` and the Xid summary use them: the meaning, and the
    escalation whole or split into "repeated <scope> → <then>". An operator's edit has no translation and shows
    as typed."""
    from fleet.health.rules.xid import _REPEATED
    from fleet_agent.xid import UNKNOWN_XID, XID_CATALOG

    ids: dict[str, str] = {}
    for code, entry in [*XID_CATALOG.items(), ("unknown", UNKNOWN_XID)]:
        ids[entry["meaning"]] = f"Xid {code} meaning"
        escalation = entry["escalation"].strip()
        match = _REPEATED.search(escalation)
        if match is None:
            ids[escalation] = f"Xid {code} escalation"
            continue
        if match.group(1).strip():
            ids[match.group(1).rstrip()] = f"Xid {code} escalation scope"
        ids[match.group(2).strip()] = f"Xid {code} escalation action"
    return ids


# -- a small .po reader (no polib dependency) ---------------------------------------------------------------------


def _unquote(line: str) -> str:
    return ast.literal_eval(line)


def read_po(path: Path = PO) -> list[dict]:
    """Entries of a .po file: {"msgid", "msgstr", "fuzzy", "line"} (the header entry included, msgid "")."""
    entries, current, field = [], None, None
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or (line.startswith("#") and not line.startswith("#,")):
            if current and field == "msgstr" and not line:
                entries.append(current)
                current, field = None, None
            continue
        if line.startswith("#,"):
            if current and field == "msgstr":
                entries.append(current)
                current, field = None, None
            current = current or {"msgid": "", "msgstr": "", "fuzzy": False, "line": number}
            current["fuzzy"] = "fuzzy" in line
            continue
        if line.startswith("msgid "):
            if current and field == "msgstr":
                entries.append(current)
                current = None
            current = current or {"msgid": "", "msgstr": "", "fuzzy": False, "line": number}
            current["line"] = number
            field, current["msgid"] = "msgid", _unquote(line[6:])
        elif line.startswith("msgstr "):
            field, current["msgstr"] = "msgstr", _unquote(line[7:])
        elif line.startswith('"'):
            current[field] += _unquote(line)
    if current:
        entries.append(current)
    return entries


def _catalogue() -> dict[str, dict]:
    return {entry["msgid"]: entry for entry in read_po() if entry["msgid"]}


# -- the tests -----------------------------------------------------------------------------------------------------


def test_every_translation_call_has_a_literal_message_id():
    _, problems = scan_msgids()
    assert not problems, "\n".join(problems)


def test_every_code_message_is_translated_with_the_same_placeholders():
    catalogue = _catalogue()
    found, _ = scan_msgids()
    assert len(found) > 150, "the scan found suspiciously few messages"
    missing = [f"{', '.join(where[:2])}: {msgid!r}" for msgid, where in sorted(found.items())
               if msgid not in catalogue]
    assert not missing, "not in fleet/locale/zh_Hans/LC_MESSAGES/django.po:\n" + "\n".join(missing)
    _check_entries(catalogue, found)


def test_every_runtime_text_is_translated():
    """Rule titles, descriptions, remedies and parameter help, and the labels set into sentences."""
    catalogue = _catalogue()
    ids = runtime_msgids()
    missing = [f"{where}: {msgid!r}" for msgid, where in sorted(ids.items(), key=lambda i: i[1])
               if msgid not in catalogue]
    assert not missing, "not in the catalogue:\n" + "\n".join(missing)
    _check_entries(catalogue, ids)


def _check_entries(catalogue: dict, ids) -> None:
    bad = []
    for msgid in ids:
        entry = catalogue[msgid]
        where = f"django.po:{entry['line']}"
        if entry["fuzzy"]:
            bad.append(f"{where}: fuzzy: {msgid!r}")
        elif not entry["msgstr"].strip():
            bad.append(f"{where}: empty translation: {msgid!r}")
        elif placeholders(msgid) != placeholders(entry["msgstr"]):
            bad.append(f"{where}: placeholders {sorted(placeholders(msgid))} ≠ "
                       f"{sorted(placeholders(entry['msgstr']))}: {msgid!r}")
    assert not bad, "\n".join(bad)


def test_the_catalogue_holds_no_stale_entries():
    catalogue = _catalogue()
    found, _ = scan_msgids()
    used = set(found) | set(runtime_msgids())
    stale = [f"django.po:{entry['line']}: {msgid!r}" for msgid, entry in catalogue.items() if msgid not in used]
    assert not stale, "no longer used (remove them):\n" + "\n".join(stale)


def test_the_catalogue_has_no_duplicate_ids():
    ids = [entry["msgid"] for entry in read_po()]
    duplicates = sorted({msgid for msgid in ids if ids.count(msgid) > 1})
    assert not duplicates, duplicates


def test_the_committed_mo_is_the_po_compiled():
    """`manage.py compilemessages` must be rerun after editing the .po (the .mo is committed)."""
    compiled = pygettext.GNUTranslations(io.BytesIO(MO.read_bytes()))
    expected = {e["msgid"]: e["msgstr"] for e in read_po() if e["msgid"] and e["msgstr"] and not e["fuzzy"]}
    magic, _revision, count = struct.unpack("<III", MO.read_bytes()[:12])
    assert magic == 0x950412DE
    assert count == len(expected) + 1  # and the header
    mismatched = [msgid for msgid, msgstr in expected.items() if compiled.gettext(msgid) != msgstr]
    assert not mismatched, f"the .mo differs from the .po for {len(mismatched)} ids, e.g. {mismatched[:3]}"
    assert compiled.info().get("content-type", "").lower().endswith("charset=utf-8")


@pytest.mark.parametrize("msgid", ["GPU {index}: NVLink errors in the last {minutes:.0f} min ({described})",
                                   "Step {number} — {summary} — owner: {owner}"])
def test_format_specs_survive_in_the_translation(msgid):
    """A "{minutes:.0f}" in the id keeps its format spec in Chinese (the numbers render the same way)."""
    msgstr = _catalogue()[msgid]["msgstr"]
    specs = set(re.findall(r"\{(\w+)(:[^}]*)?\}", msgid))
    assert specs == set(re.findall(r"\{(\w+)(:[^}]*)?\}", msgstr))
