"""Parse rate of the agent's kernel-log reader over the public corpus of real lines
(tests/agents/fixtures/kernel_corpus/corpus.json: lines from public bug reports, each with its link).

    .venv/bin/python bench/kernel_corpus.py

For each source (dmesg, journal) and format: how many of the faults an operator reads in the lines the reader
turns into the right event (kind, code, GPU address, severity), and the total. No network, no database.
"""

import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "agents"))

from fleet_agent.collectors.kernel_log import KernelLogCollector  # noqa: E402

CORPUS = ROOT / "tests/agents/fixtures/kernel_corpus/corpus.json"


def main() -> None:
    entries = json.loads(CORPUS.read_text())["entries"]
    by_source: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    with tempfile.TemporaryDirectory() as folder:
        for number, entry in enumerate(entries):
            path = Path(folder) / f"{number}.log"
            path.write_text("\n".join(entry["lines"]) + "\n")
            events = KernelLogCollector(str(path), Path(folder) / f"{number}.state").collect()
            got = [{key: event.get(key) for key in want} for event, want in zip(events, entry["expect"],
                                                                                 strict=False)]
            right = sum(1 for have, want in zip(got, entry["expect"], strict=False) if have == want)
            extra = max(len(events) - len(entry["expect"]), 0)
            by_source[entry["source"]][0] += right
            by_source[entry["source"]][1] += len(entry["expect"])
            print(f"{right}/{len(entry['expect'])} right, {extra} extra  [{entry['source']}] {entry['format']}  "
                  f"({entry['source_url']})")
    total = [sum(v[0] for v in by_source.values()), sum(v[1] for v in by_source.values())]
    for source, (right, expected) in sorted(by_source.items()):
        print(f"{source:8} {right}/{expected} = {100 * right / expected:.0f} %")
    print(f"{'all':8} {total[0]}/{total[1]} = {100 * total[0] / total[1]:.0f} %")


if __name__ == "__main__":
    main()
