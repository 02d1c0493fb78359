"""How far the Xid policy follows NVIDIA's Xid catalog, code by code (no database, no network).

    .venv/bin/python bench/xid_agreement.py             # the figures, and every difference with its reason
    .venv/bin/python bench/xid_agreement.py --markdown  # the table docs/health.md carries

Coverage of the codes NVIDIA lists; on the codes whose immediate resolution NVIDIA states in one word, the share
where our fatal flag and first action agree with it; the share of the codes NVIDIA sends to the application that
sit on the application layer. Baseline in the same run: the catalog as it stood before it followed NVIDIA's
(2026.12-2, 27 codes, the rest defaulting to "warning, hardware"), measured the same way.
"""

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "agents")]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")

# The catalog before it followed NVIDIA's (2026.12-2): its 27 codes' first action, fatal flag and layer; every other
# code fell to "warning / watch, hardware".
BEFORE = {13: ("restart_app", False, "application"), 31: ("restart_app", False, "application"),
          43: ("restart_app", False, "application"), 45: ("ignore", False, "application"),
          46: ("reset_gpu", True, "gpu_driver"), 48: ("reset_gpu", True, "hardware"),
          61: ("reset_gpu", True, "hardware"), 62: ("reset_gpu", True, "hardware"),
          63: ("reset_gpu", False, "hardware"), 64: ("reset_gpu", True, "hardware"),
          74: ("reset_gpu", True, "hardware"), 79: ("reboot", True, "hardware"), 92: ("watch", False, "hardware"),
          94: ("restart_app", False, "hardware"), 95: ("reset_gpu", True, "hardware"),
          119: ("reset_gpu", True, "gpu_driver"), 120: ("reset_gpu", True, "gpu_driver"),
          136: ("reset_gpu", True, "hardware"), 140: ("reset_gpu", True, "hardware"),
          143: ("hardware", True, "hardware"), **{c: ("reset_gpu", True, "hardware") for c in range(144, 151)},
          154: ("follow_referenced", False, "hardware")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markdown", action="store_true", help="print the docs table instead")
    args = parser.parse_args()
    import django

    django.setup()
    from fleet.health import xid_seed
    from fleet_agent import xid
    from fleet_agent.xid_nvidia import NVIDIA_XIDS, SOURCE

    if args.markdown:
        print(xid_seed.xid_catalog_markdown())
        return
    now = xid_seed.xid_agreement()
    saved = dict(xid.XID_CATALOG)
    unknown = {"action": "watch", "fatal": False, "layer": "hardware"}
    xid_seed.XID_CATALOG.clear()
    for code in NVIDIA_XIDS:
        action, fatal, layer = BEFORE.get(code, (unknown["action"], unknown["fatal"], unknown["layer"]))
        xid_seed.XID_CATALOG[code] = {"action": action, "fatal": fatal, "layer": layer, "differs": ""}
    before = xid_seed.xid_agreement()
    before["covered"] = len(BEFORE)
    xid_seed.XID_CATALOG.clear()
    xid_seed.XID_CATALOG.update(saved)
    print(f"NVIDIA's catalog: {SOURCE['title']}, as of {SOURCE['as_of']}: {now['listed']} codes")
    for name in ("covered", "compared", "fatal_agree_pct", "first_action_agree_pct", "application_layer_pct"):
        ratio = f"  (before: {before[name]})"
        print(f"  {name:24} {now[name]}{ratio}")
    print("  differences (code: reason):")
    print(json.dumps({"fatal": now["fatal_differs"], "first_action": now["first_action_differs"],
                      "application_layer": now["application_layer_differs"]}, indent=1))
    for code, why in now["not_compared"].items():
        print(f"  Xid {code}: not compared one-to-one: {why}")


if __name__ == "__main__":
    main()
