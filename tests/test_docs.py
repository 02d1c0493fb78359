"""The documents stay true to the code and self-contained."""

import importlib
import os
import re
from pathlib import Path

from fleet.inventory.boundary import DEFAULT_MATRIX
from fleet.inventory.choices import DeliveryForm

ROOT = Path(__file__).resolve().parent.parent
TEXT_SUFFIXES = {".py", ".md", ".ts", ".tsx", ".toml", ".json", ".sh", ".yml", ".yaml", ".txt", ".html", ".cfg"}
SKIP_DIRS = {"node_modules", ".venv", "var", "dist", "build", "test-artifacts", "__pycache__", ".git"}
OUTSIDE_NOTES = re.compile(r"\b(?:DESIGN|REFERENCE|STYLE)\.md\b|design\s+notes|\.\./shared\b", re.IGNORECASE)


def _text_files():
    for directory, subdirectories, files in os.walk(ROOT):
        # Pruned in place so that node_modules and the virtualenv are never walked.
        subdirectories[:] = [d for d in subdirectories if d not in SKIP_DIRS and (not d.startswith(".") or d == ".ci")]
        for name in files:
            path = Path(directory, name)
            if path.suffix in TEXT_SUFFIXES or name in {"Makefile", "Dockerfile"}:
                yield path.relative_to(ROOT), path


def test_no_file_points_at_notes_outside_the_repository():
    hits = []
    for relative, path in _text_files():
        for number, line in enumerate(path.read_text(errors="ignore").splitlines(), 1):
            if OUTSIDE_NOTES.search(line):
                hits.append(f"{relative}:{number}: {line.strip()[:100]}")
    assert not hits, "what a reader needs belongs in docs/:\n" + "\n".join(hits)


def test_the_concepts_page_shows_the_default_responsibility_matrix():
    text = (ROOT / "docs/concepts.md").read_text()
    header = "| layer | " + " | ".join(f"`{form}`" for form in DeliveryForm) + " |"
    assert header in text
    rows = {}
    for line in text.splitlines():
        match = re.fullmatch(r"\| `(\w+)` \| (.+) \|", line)
        if match and match.group(1) in DEFAULT_MATRIX:
            rows[match.group(1)] = [cell.strip() for cell in match.group(2).split("|")]
    assert rows == {layer: [DEFAULT_MATRIX[layer][form] for form in DeliveryForm] for layer in DEFAULT_MATRIX}


def test_the_health_public_api_table_names_what_exists():
    text = (ROOT / "docs/health.md").read_text()
    section = text.split("## Public API for other apps", 1)[1].split("\n## ", 1)[0]
    checked = 0
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) < 2 or not cells[1].startswith("`fleet."):
            continue
        where = cells[1].strip("`")
        names = re.findall(r"`(\w+)\(", cells[0])
        if names:
            module = importlib.import_module(where)
            missing = [name for name in names if not hasattr(module, name)]
        else:  # the whole path is in "where": a module attribute such as a task
            module_path, _, attribute = where.rpartition(".")
            missing = [] if hasattr(importlib.import_module(module_path), attribute) else [where]
        assert not missing, f"docs/health.md names {missing} in {where}"
        checked += 1
    assert checked >= 8


def test_the_health_page_carries_the_xid_catalog_as_generated():
    """docs/health.md's Xid table is generated from the one catalog (bench/xid_agreement.py --markdown): a changed
    entry without the regenerated table fails here."""
    from fleet.health.xid_seed import TABLE_BEGIN, TABLE_END, xid_catalog_markdown

    text = (ROOT / "docs" / "health.md").read_text()
    shown = text[text.index(TABLE_BEGIN):text.index(TABLE_END) + len(TABLE_END)]
    assert shown == xid_catalog_markdown()
