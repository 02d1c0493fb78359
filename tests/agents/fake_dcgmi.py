"""A fake ``dcgmi`` on PATH for the agent tests: replays recorded ``dcgmi diag -j`` outputs.

``install(bin_dir, {level: (fixture file, exit status)})`` writes an executable ``dcgmi`` into ``bin_dir`` that
answers ``dcgmi diag -r LEVEL -j`` with the fixture's bytes and exit status, ``dcgmi --version`` and
``dcgmi discovery -l`` like DCGM does, and logs each call's arguments to ``bin_dir/dcgmi.calls``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "dcgm"

SCRIPT = """#!{python}
import json, pathlib, sys
here = pathlib.Path(__file__).resolve().parent
with open(here / "dcgmi.calls", "a") as fh:
    fh.write(" ".join(sys.argv[1:]) + "\\n")
plan = json.loads((here / "dcgmi.plan").read_text())
args = sys.argv[1:]
if args[:1] == ["--version"]:
    print("dcgmi  version: 4.2.3")
    sys.exit(0)
if args[:1] == ["discovery"]:
    print("8 GPUs found.")
    sys.exit(0)
if args[:1] == ["diag"] and "-r" in args:
    level = args[args.index("-r") + 1]
    if level not in plan:
        sys.stderr.write("Error: Unable to complete diagnostic for group 0. Return: (-7) Host engine connection "
                         "invalid/disconnected.\\n")
        sys.exit(255)
    fixture, status = plan[level]
    sys.stdout.write(pathlib.Path(fixture).read_text())
    sys.exit(status)
sys.stderr.write("unexpected arguments\\n")
sys.exit(2)
"""


def install(bin_dir: Path, plan: dict[int, tuple[str, int]]) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "dcgmi"
    script.write_text(SCRIPT.format(python=sys.executable))
    script.chmod(0o755)
    (bin_dir / "dcgmi.plan").write_text(json.dumps({str(level): [str(FIXTURES / name), status]
                                                    for level, (name, status) in plan.items()}))
    return script


def calls(bin_dir: Path) -> list[str]:
    path = bin_dir / "dcgmi.calls"
    return path.read_text().splitlines() if path.exists() else []


def on_path(monkeypatch, bin_dir: Path) -> None:
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
