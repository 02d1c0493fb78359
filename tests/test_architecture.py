"""The import rules of docs/architecture.md: an app imports only the apps below it.

Walks every module under fleet/ (migrations aside: a migration names other apps' models by label, which is how
Django wires foreign keys, not an import of their code) and fails on an import that points up or sideways.
"""

import ast
from pathlib import Path

FLEET = Path(__file__).resolve().parent.parent / "fleet"

# Each app with the apps it may import. The order of docs/architecture.md: core ← accounts ← inventory ←
# telemetry ← billing ← health ← remediation ← integrations, executors ← demo; the console serves the SPA.
LAYERS = ["core", "accounts", "inventory", "telemetry", "billing", "health", "remediation"]
ALLOWED = {app: set(LAYERS[:i]) for i, app in enumerate(LAYERS)}
ALLOWED["integrations"] = set(LAYERS)
ALLOWED["executors"] = set(LAYERS)
ALLOWED["console"] = {"core"}
ALLOWED["demo"] = set(ALLOWED) - {"demo"}


def _imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """Absolute module names `path` imports, relative imports resolved against its package."""
    package = path.relative_to(root.parent).with_suffix("").parts
    if package[-1] != "__init__":
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = list(package[:len(package) - node.level + 1]) if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found.append((node.lineno, module))
            # `from fleet import health` names the app in the alias, not the module
            if module == "fleet":
                found += [(node.lineno, f"fleet.{alias.name}") for alias in node.names]
    return found


def violations(root: Path = FLEET) -> list[str]:
    wrong = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if len(parts) < 2 or "migrations" in parts:
            continue
        app = parts[0]
        for line, module in _imports(path, root):
            names = module.split(".")
            if names[0] != "fleet" or len(names) < 2 or names[1] == app:
                continue
            if names[1] not in ALLOWED.get(app, set()):
                wrong.append(f"{path.relative_to(root.parent)}:{line} imports {module} "
                             f"({app} may import {', '.join(sorted(ALLOWED.get(app, ()))) or 'no other app'})")
    return wrong


def test_every_app_is_in_the_layer_table():
    apps = {p.parent.name for p in FLEET.glob("*/apps.py")}
    assert apps <= set(ALLOWED), f"add {sorted(apps - set(ALLOWED))} to the layers here and in docs/architecture.md"


def test_imports_point_down_the_layers():
    assert violations() == []


def test_core_imports_no_domain_app():
    assert not [v for v in violations() if v.startswith("fleet/core/")]
    assert ALLOWED["core"] == set()


def test_an_upward_import_is_caught(tmp_path):
    """The walker itself: an import that points up (absolute, relative or by alias) is reported."""
    root = tmp_path / "fleet"
    for app in ("core", "telemetry", "health"):
        (root / app / "services").mkdir(parents=True)
        (root / app / "__init__.py").write_text("")
        (root / app / "services" / "__init__.py").write_text("")
    (root / "core" / "services" / "audit.py").write_text("from fleet.accounts.models import User\n")
    (root / "telemetry" / "services" / "ingest.py").write_text(
        "from ..models import Event\nfrom fleet import health\nimport fleet.billing.selectors\n")
    (root / "health" / "services" / "ok.py").write_text("from fleet.telemetry.models import Event\nfrom . import x\n")
    (root / "health" / "migrations").mkdir()
    (root / "health" / "migrations" / "0001.py").write_text("from fleet.billing import models\n")
    found = violations(root)
    assert [v.split(" (")[0] for v in found] == [
        "fleet/core/services/audit.py:1 imports fleet.accounts.models",
        "fleet/telemetry/services/ingest.py:2 imports fleet.health",
        "fleet/telemetry/services/ingest.py:3 imports fleet.billing.selectors",
    ]
