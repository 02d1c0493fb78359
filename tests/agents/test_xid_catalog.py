"""The Xid policy against NVIDIA's Xid catalog ("Analyzing Xid Errors with the Xid Catalog"): every code NVIDIA
lists is known; the fatal flag, the first action and the application layer follow NVIDIA's resolutions; each
difference says why. The expectations below are NVIDIA's published resolutions, code by code, as an operator
reads them in the catalog — not the derivation in fleet_agent/xid.py."""

import pytest

from fleet_agent.xid import UNKNOWN_XID, XID_CATALOG, xid_info
from fleet_agent.xid_nvidia import NVIDIA_XIDS, SOURCE, UNUSED


def test_every_code_nvidia_lists_is_in_the_catalog():
    assert len(NVIDIA_XIDS) == SOURCE["codes"] == 172
    assert sum(facts[1] != UNUSED for facts in NVIDIA_XIDS.values()) == 109  # raised by current drivers
    assert set(XID_CATALOG) == set(NVIDIA_XIDS)
    for code, entry in XID_CATALOG.items():
        assert entry["nvidia"]["mnemonic"] == NVIDIA_XIDS[code][0], code
        assert entry["meaning"] and entry["escalation"], code


# (code, NVIDIA's immediate resolution → what an operator does first, fatal?, layer) for the codes the catalog's
# readers meet most, and for those the earlier policy got wrong.
NVIDIA_SAYS = [
    (13, "restart_app", False, "application"),   # RESTART_APP; investigate the application (workflow 13)
    (31, "restart_app", False, "application"),   # RESTART_APP; workflow 31 (the application's MMU fault)
    (11, "restart_app", False, "application"),   # RESTART_APP / CHECK_APP/CUDA
    (25, "restart_app", False, "application"),
    (69, "restart_app", False, "application"),
    (80, "restart_app", False, "application"),
    (137, "watch", False, "application"),        # IGNORE, then the Xid 137 flow (the application's NVLink use)
    (45, "ignore", False, "application"),        # follow the earlier Xid
    (48, "reset_gpu", True, "hardware"),         # double-bit ECC: NVIDIA's Xid 48 workflow resets
    (63, "ignore", False, "hardware"),           # IGNORE / IGNORE: the next reset activates the remap
    (64, "reset_gpu", True, "hardware"),         # remapping failure: RESET_GPU, then CONTACT_SUPPORT
    (79, "reboot", True, "hardware"),            # fallen off the bus: RESTART_BM
    (94, "restart_app", False, "hardware"),      # contained memory error: RESTART_APP; the memory is the fault
    (39, "restart_app", False, "hardware"),      # copy engine exception: RESTART_APP, then CONTACT_SUPPORT
    (95, "reset_gpu", True, "hardware"),         # uncontained: RESET_GPU
    (109, "reset_gpu", True, "hardware"),        # context switch timeout: RESET_GPU
    (110, "reset_gpu", True, "gpu_driver"),      # security fault: RESET_GPU, investigate the software
    (119, "reset_gpu", True, "gpu_driver"),      # GSP RPC timeout: RESET_GPU, investigate the software
    (143, "reset_gpu", True, "hardware"),        # initialisation error: NVIDIA resets first
    (151, "reboot", True, "gpu_driver"),         # key rotation: RESTART_VM
    (155, "reset_gpu", True, "application"),     # NVLink SW-defined error: RESET_GPU, investigate the user's SW
    (156, "reset_gpu", True, "hardware"),        # resource retirement event: RESET_GPU
    (158, "reset_gpu", True, "hardware"),        # GPU fatal timeout: RESET_GPU
    (54, "hardware", True, "hardware"),          # auxiliary power not connected: CHECK_MECHANICALS
    (154, "follow_referenced", False, "gpu_driver"),  # states the recovery action the driver wants
]


@pytest.mark.parametrize(("code", "action", "fatal", "layer"), NVIDIA_SAYS, ids=[str(c[0]) for c in NVIDIA_SAYS])
def test_first_action_fatal_flag_and_layer_follow_nvidia(code, action, fatal, layer):
    entry = XID_CATALOG[code]
    assert (entry["action"], entry["fatal"], entry["layer"]) == (action, fatal, layer)
    assert entry["fatal"] == (entry["severity"] == "critical")


def test_agreement_with_nvidia_is_complete_and_every_difference_has_a_reason():
    from fleet.health.xid_seed import xid_agreement

    figures = xid_agreement()
    assert figures["covered"] == figures["listed"] == 172
    assert figures["fatal_agree_pct"] == 100.0 and figures["application_layer_pct"] == 100.0
    assert figures["first_action_agree_pct"] >= 95.0
    for code in figures["first_action_differs"] + list(figures["not_compared"]):
        assert XID_CATALOG[code]["differs"], f"Xid {code} differs from NVIDIA without a reason"


def test_a_code_nvidia_does_not_list_is_looked_up_not_sent_to_hardware():
    info = xid_info(173)
    assert info["known"] is False and info["layer"] != "hardware" and info["action"] == "watch"
    assert "look it up" in info["meaning"] and info == {**UNKNOWN_XID, "code": 173, "known": False,
                                                        "catalog_version": info["catalog_version"]}


def test_an_unused_code_is_watched_and_the_nonfatal_nvlink5_burst_does_not_reset():
    assert (XID_CATALOG[61]["action"], XID_CATALOG[61]["fatal"]) == ("watch", False)  # listed as unused
    for code in range(144, 151):
        assert XID_CATALOG[code]["action"] != "reset_gpu" and not XID_CATALOG[code]["fatal"]
        assert "sub-code" in XID_CATALOG[code]["differs"]


# Lines as drivers print them (the NVLink5 form from a B200 on driver 575; Xid 154's wording with NVML's recovery
# action values, nvmlDeviceGpuRecoveryAction_t).
NVLINK5_NONFATAL = ("NVRM: Xid (PCI:0000:b9:00): 145, RLW, nonfatal, cross-contain=0, injected=0, Link 3 "
                    "(0x00000004 0x00000001 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)")
NVLINK5_FATAL = ("NVRM: Xid (PCI:0000:b9:00): 144, SAW_MVB, fatal, cross-contain=0, injected=0, Link 7 "
                 "(0x00000002 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)")
XID_154 = ("NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 "
           "(GPU Reset Required)")


def test_nvlink5_lines_are_read_per_subcode_and_xid_154_states_its_action():
    from fleet_agent.collectors.kernel_log import parse_line
    from fleet_agent.xid import xid_decode

    assert xid_decode(145, NVLINK5_NONFATAL) == {"severity": "warning", "action": "watch", "fatal": False,
                                                 "detail": "non-fatal on link 3"}
    assert xid_decode(144, NVLINK5_FATAL)["action"] == "reset_gpu"  # NVIDIA's decode: fatal → RESET_GPU
    assert xid_decode(154, XID_154)["action"] == "reset_gpu"
    assert xid_decode(154, XID_154.replace("0x1 (GPU Reset Required)", "0x2 (Node Reboot Required)"))[
        "action"] == "reboot"
    assert xid_decode(79, "GPU has fallen off the bus.") is None
    assert parse_line(NVLINK5_NONFATAL)["severity"] == "warning"
    assert parse_line(NVLINK5_FATAL)["severity"] == "critical"
    assert parse_line(XID_154)["severity"] == "critical"
