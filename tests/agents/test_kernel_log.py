"""Kernel log collector: lines in the kernel's own formats (NVRM Xid, SXid, PCIe AER) through parse_line and the
collector."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleet_agent.collectors.kernel_log import KernelLogCollector, coalesce_aer, parse_line
from fleet_agent.protocol import normalize_pci_bus_id
from fleet_agent.xid import CATALOG_VERSION, XID_CATALOG, xid_info

FIXTURES = Path(__file__).parent / "fixtures" / "kernel"
EVENT_KEYS = {"kind", "at", "gpu_uuid", "pci_bus_id", "code", "severity", "message", "raw"}

XID_79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1911, name=python3, GPU has fallen off the bus."
UUID_3B = "GPU-5f9c2c1e-88e3-4a9a-a3c7-0c1b6d1f6d3e"
UUID_B7 = "GPU-0b5d6f47-21f1-4c6f-9f7e-6b3c2d1a0e99"
UUID_91 = "GPU-91919191-0000-4000-8000-000000000091"


@pytest.fixture
def local_tz(monkeypatch):
    """Switch the process's local zone (dmesg -T and journal stamps are local time)."""
    def switch(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        time.tzset()
    yield switch
    monkeypatch.undo()
    time.tzset()


# --- parse_line: prefixes ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "at"),
    [
        (XID_79, None),
        (f"[ 1843.102938] {XID_79}", None),
        (f"[1843.102938] {XID_79}", None),
        (f"[Wed Dec  2 18:45:00 2026] {XID_79}", "2026-12-02T18:45:00Z"),
        (f"[Sun Nov 15 09:05:07 2026] {XID_79}", "2026-11-15T09:05:07Z"),
        (f"4,1026,4120000100,-;{XID_79}", None),
        (f"4,1026,4120000100,c,caller=T12;{XID_79}", None),
        (f"2026-12-02T18:45:00.123456+0000 gpu-01 kernel: {XID_79}", "2026-12-02T18:45:00Z"),
        (f"2026-12-02T20:45:00+02:00 gpu-01 kernel: {XID_79}", "2026-12-02T18:45:00Z"),
        (f"Dec  2 18:45:00 gpu-01 kernel: [ 1843.102938] {XID_79}", None),  # at checked below
    ],
)
def test_xid_line_parses_with_every_prefix(line, at, local_tz):
    local_tz("UTC")
    event = parse_line(line)
    assert event is not None and set(event) == EVENT_KEYS
    assert (event["kind"], event["code"], event["severity"]) == ("xid", 79, "critical")
    assert event["pci_bus_id"] == "00000000:3B:00.0"
    assert event["gpu_uuid"] is None
    assert event["raw"] == line
    assert "GPU has fallen off the bus" in event["message"]
    if not line.startswith("Dec"):
        assert event["at"] == at


def test_journal_short_precise_prefix_infers_the_year(local_tz):
    local_tz("UTC")
    yesterday = datetime.now(UTC) - timedelta(days=1)
    stamp = yesterday.strftime("%b %d %H:%M:%S") + ".123456"
    event = parse_line(f"{stamp} gpu-01 kernel: {XID_79}")
    assert event["at"] == yesterday.strftime("%Y-%m-%dT%H:%M:%SZ")
    # A month/day that would lie days ahead this year must be last year's.
    ahead = datetime.now(UTC) + timedelta(days=3)
    event = parse_line(ahead.strftime("%b %d %H:%M:%S") + f".000001 gpu-01 kernel: {XID_79}")
    expected_year = ahead.year - 1
    assert event["at"].startswith(f"{expected_year}-{ahead:%m-%d}")


def test_local_time_prefixes_are_converted_to_utc(local_tz):
    local_tz("Asia/Shanghai")  # UTC+8, no DST
    assert parse_line(f"[Wed Dec  2 18:45:00 2026] {XID_79}")["at"] == "2026-12-02T10:45:00Z"
    local_tz("America/New_York")  # UTC-5 in December
    assert parse_line(f"[Wed Dec  2 18:45:00 2026] {XID_79}")["at"] == "2026-12-02T23:45:00Z"
    # An explicit offset wins over the local zone.
    line = f"2026-12-02T18:45:00.5+0000 gpu-01 kernel: {XID_79}"
    assert parse_line(line)["at"] == "2026-12-02T18:45:00Z"


# --- parse_line: messages ------------------------------------------------------------------------
def test_old_xid_format_without_pci_prefix():
    event = parse_line("NVRM: Xid (0000:03:00): 14, Channel 00000001")
    assert (event["kind"], event["code"], event["pci_bus_id"]) == ("xid", 14, "00000000:03:00.0")
    assert event["severity"] == "warning"  # not in the catalog: the default
    assert "Channel 00000001" in event["message"]


def test_new_and_old_format_name_the_same_gpu():
    new = parse_line("[ 5.1] NVRM: Xid (PCI:0000:03:00): 31, pid=2201, name=train.py, Ch 00000008, intr 10000000")
    old = parse_line("[ 5.1] NVRM: Xid (0000:03:00): 31, Ch 00000008, intr 10000000")
    assert new["pci_bus_id"] == old["pci_bus_id"] == "00000000:03:00.0"
    assert new["code"] == old["code"] == 31
    assert new["severity"] == old["severity"] == XID_CATALOG[31]["severity"] == "warning"


# 63: NVIDIA's catalog resolves a remapping event with IGNORE / IGNORE (the next reset activates the remap): info.
@pytest.mark.parametrize(("code", "severity"), [(13, "warning"), (45, "info"), (48, "critical"), (63, "info"),
                                                (92, "warning"), (94, "warning"), (95, "critical"),
                                                (143, "critical"), (154, "warning")])
def test_xid_severity_comes_from_the_catalog(code, severity):
    event = parse_line(f"NVRM: Xid (PCI:0000:01:00): {code}, pid=1, name=x, something")
    assert event["severity"] == severity == xid_info(code)["severity"]


@pytest.mark.parametrize("code", [119, 120])
def test_gsp_timeouts_are_critical_xids(code):
    line = (f"[ 3001.000114] NVRM: Xid (PCI:0000:b7:00): {code}, pid=51240, name=pt_main_thread, "
            "Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 76 (GSP_RM_CONTROL)")
    event = parse_line(line)
    assert (event["kind"], event["code"], event["severity"]) == ("xid", code, "critical")
    assert event["pci_bus_id"] == "00000000:B7:00.0"
    assert "Timeout after 6s" in event["message"]


def test_fallen_off_the_bus_without_an_xid_is_gpu_lost():
    event = parse_line("[ 4120.000000] NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.")
    assert (event["kind"], event["code"], event["severity"]) == ("gpu_lost", None, "critical")
    assert event["pci_bus_id"] == "00000000:91:00.0"


def test_fallen_off_the_bus_without_an_address_takes_no_clock_time_for_one():
    # A line that names no GPU is kept (the collector attributes it to the GPU another line of the same message
    # names, or says it cannot); "18:45" is a clock time, not a bus address.
    event = parse_line("NVRM: A GPU has fallen off the bus at 18:45")
    assert (event["kind"], event["pci_bus_id"]) == ("gpu_lost", None)


@pytest.mark.parametrize(
    ("line", "code", "severity"),
    [
        ("nvidia-nvswitch2: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up", 20034, "critical"),
        ("nvidia-nvswitch2: SXid (PCI:0000:06:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error",
         12028, "warning"),
        ("[ 3300.1] nvidia-nvswitch11: SXid (PCI:0000:06:00.0): 11004, Non-Fatal, Link 12 ingress invalid ACL",
         11004, "warning"),
    ],
)
def test_nvswitch_sxid(line, code, severity):
    event = parse_line(line)
    assert (event["kind"], event["code"], event["severity"]) == ("sxid", code, severity)
    assert event["pci_bus_id"] == "00000000:06:00.0"
    assert "nvswitch" in event["message"]


@pytest.mark.parametrize(
    ("line", "pci", "severity"),
    [
        ("pcieport 0000:00:01.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, "
         "(Requester ID)", "00000000:00:01.0", "critical"),
        ("pcieport 0000:00:01.0: AER: PCIe Bus Error: severity=Uncorrectable (Fatal), type=Transaction Layer, "
         "(Receiver ID)", "00000000:00:01.0", "critical"),
        ("nvidia 0000:3b:00.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, "
         "(Requester ID)", "00000000:3B:00.0", "warning"),
        ("nvidia 0000:3b:00.0: PCIe Bus Error: severity=Uncorrectable (Non-Fatal), type=Data Link Layer",
         "00000000:3B:00.0", "warning"),
        ("nvidia 0000:3b:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
         "00000000:3B:00.0", "info"),
        ("nvidia 0000:3b:00.0: PCIe Bus Error: severity=Correctable, type=Physical Layer, (Receiver ID)",
         "00000000:3B:00.0", "info"),
        ("pcieport 0000:b0:02.0: AER: Corrected error received: 0000:b7:00.0", "00000000:B7:00.0", "info"),
        ("pcieport 0000:b0:02.0: AER: Correctable error received: 0000:b7:00.0", "00000000:B7:00.0", "info"),
        ("pcieport 0000:b0:02.0: AER: Multiple Uncorrected (Fatal) error received: 0000:b7:00.0",
         "00000000:B7:00.0", "critical"),
        ("pcieport 0000:b0:02.0: AER: Uncorrectable (Non-Fatal) error received: 0000:b7:00.0",
         "00000000:B7:00.0", "warning"),
        # Older kernels name the source by requester id: 0x0018 is bus 00, device 03, function 0.
        ("pcieport 0000:00:03.0: AER: Corrected error received: id=0018", "00000000:00:03.0", "info"),
    ],
)
def test_pcie_aer_both_spellings(line, pci, severity):
    event = parse_line(f"[ 3302.884411] {line}")
    assert (event["kind"], event["code"], event["severity"], event["pci_bus_id"]) == ("aer", None, severity, pci)


@pytest.mark.parametrize(
    "line",
    [
        "", "   ", "\n", "garbage", "NVRM: Xid", "NVRM: Xid (PCI:zzzz): 79,", "NVRM: Xid (PCI:0000:3b:00): abc, x",
        "[ 5.120334] nvidia-nvlink: Nvlink Core is being initialized, major device number 508",
        "nvidia 0000:b7:00.0:   device [10de:2330] error status/mask=00000001/0000e000",
        "NVRM: GPU at PCI:0000:91:00: GPU-5f9c2c1e-88e3-4a9a-a3c7-0c1b6d1f6d3e",
        "nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 12028, Data {0x00000000, 0x00000000}",
        "1,2,3,-;", " SUBSYSTEM=pci", "\x00\xff\ufffd" * 50, "[" * 10000, "NVRM: Xid (" + "0:" * 5000,
    ],
)
def test_garbage_lines_are_skipped(line):
    assert parse_line(line) is None


@pytest.mark.parametrize("value", [None, b"NVRM: Xid (PCI:0000:3b:00): 79, x", 79, ["x"]])
def test_parse_line_never_raises_on_non_strings(value):
    assert parse_line(value) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PCI:0000:3b:00", "00000000:3B:00.0"), ("0000:03:00", "00000000:03:00.0"),
        ("0000:91:00.0", "00000000:91:00.0"), ("00000000:01:00.0", "00000000:01:00.0"),
        ("3b:00.1", "00000000:3B:00.1"), ("0001:3B:00.0", "00000001:3B:00.0"),
        ("nonsense", None), ("", None), (None, None), ("0000:03", None),
    ],
)
def test_pci_bus_id_normalisation(text, expected):
    assert normalize_pci_bus_id(text) == expected


def test_catalog_covers_reference_xids():
    required = {13, 31, 43, 45, 46, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 136, 140, 143, 154,
                *range(144, 151)}
    assert required <= set(XID_CATALOG)
    actions = {"restart_app", "reset_gpu", "reboot", "hardware", "watch", "ignore", "follow_referenced"}
    for entry in XID_CATALOG.values():
        assert entry["severity"] in {"critical", "warning", "info"} and entry["action"] in actions
        assert entry["meaning"] and entry["escalation"]
    assert XID_CATALOG[79]["action"] == "reboot" and XID_CATALOG[154]["action"] == "follow_referenced"
    unknown = xid_info(9999)
    assert unknown["known"] is False and unknown["severity"] == "warning"
    assert xid_info(79)["catalog_version"] == CATALOG_VERSION == "2026.12-3"


# --- file source ---------------------------------------------------------------------------------
def _copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copy(FIXTURES / name, target)
    return target


def _keys(events):
    return [(e["kind"], e["code"], e["pci_bus_id"]) for e in events]


DMESG_EXPECTED = [
    ("xid", 13, "00000000:3B:00.0"), ("xid", 45, "00000000:3B:00.0"), ("xid", 14, "00000000:03:00.0"),
    ("xid", 119, "00000000:B7:00.0"), ("xid", 120, "00000000:B7:00.0"), ("sxid", 20034, "00000000:06:00.0"),
    ("sxid", 12028, "00000000:06:00.0"), ("aer", None, "00000000:B7:00.0"),  # one AER incident, two lines
    ("gpu_lost", None, "00000000:91:00.0"), ("xid", 79, "00000000:91:00.0"),
]


def test_file_source_parses_and_attributes_by_pci(tmp_path):
    log_file = _copy(tmp_path, "dmesg.log")
    # Keys in other spellings than NVML's: short domain, lower case, no function.
    pci_map = {"0000:3b:00.0": UUID_3B, "00000000:b7:00.0": UUID_B7}
    collector = KernelLogCollector(str(log_file), tmp_path / "state.json", pci_map)
    before = datetime.now(UTC).replace(microsecond=0)
    events = collector.collect()
    assert _keys(events) == DMESG_EXPECTED
    by_pci = {e["pci_bus_id"]: e["gpu_uuid"] for e in events}
    assert by_pci["00000000:3B:00.0"] == UUID_3B and by_pci["00000000:B7:00.0"] == UUID_B7
    assert by_pci["00000000:91:00.0"] is None and by_pci["00000000:03:00.0"] is None
    for event in events:  # no absolute time on "[seconds]" lines: the observation time is used
        at = datetime.fromisoformat(event["at"])
        assert before <= at <= datetime.now(UTC) + timedelta(seconds=1)
    collector.set_pci_map({"PCI:0000:91:00": UUID_91})
    with log_file.open("a") as fh:
        fh.write("[ 5000.1] NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.\n")
    (event,) = collector.collect()
    assert event["gpu_uuid"] == UUID_91


def test_file_position_survives_a_restart(tmp_path):
    log_file = _copy(tmp_path, "dmesg.log")
    state = tmp_path / "state" / "kernel.json"
    assert len(KernelLogCollector(str(log_file), state).collect()) == len(DMESG_EXPECTED)
    saved = json.loads(state.read_text())
    assert saved["offset"] == log_file.stat().st_size
    assert not list(state.parent.glob("*.tmp")) and not list(state.parent.glob(".*.tmp"))

    restarted = KernelLogCollector(str(log_file), state)
    assert restarted.collect() == []
    with log_file.open("a") as fh:
        fh.write("[ 6000.000001] NVRM: Xid (PCI:0000:3b:00): 94, pid=7, name=x, Contained: SM (0x1)\n")
        fh.write("[ 6000.000002] NVRM: Xid (PCI:0000:3b:00): 95, pid=7, name=x, Uncont")  # still being written
    assert _keys(KernelLogCollector(str(log_file), state).collect()) == [("xid", 94, "00000000:3B:00.0")]
    with log_file.open("a") as fh:
        fh.write("ained: FBHUB\n")
    (event,) = KernelLogCollector(str(log_file), state).collect()
    assert event["code"] == 95 and event["raw"].endswith("Uncontained: FBHUB")


def test_truncated_file_is_read_from_the_start(tmp_path):
    log_file = _copy(tmp_path, "dmesg.log")
    state = tmp_path / "state.json"
    collector = KernelLogCollector(str(log_file), state)
    collector.collect()
    log_file.write_text("[ 1.0] NVRM: Xid (PCI:0000:3b:00): 63, pid=1, name=x, Row Remapper\n")
    assert _keys(KernelLogCollector(str(log_file), state).collect()) == [("xid", 63, "00000000:3B:00.0")]


def test_copytruncate_that_regrew_past_the_old_offset_is_noticed(tmp_path):
    log_file = tmp_path / "kern.log"
    log_file.write_text("[ 1.0] NVRM: Xid (PCI:0000:3b:00): 13, pid=1, name=x, first\n")
    state = tmp_path / "state.json"
    KernelLogCollector(str(log_file), state).collect()
    # Same inode, rewritten with more bytes than before: the offset alone would skip these.
    with log_file.open("r+") as fh:
        fh.truncate(0)
        fh.write("[ 2.0] NVRM: Xid (PCI:0000:3b:00): 31, pid=1, name=x, second line is longer\n" * 3)
    assert [e["code"] for e in KernelLogCollector(str(log_file), state).collect()] == [31, 31, 31]


def test_rotated_file_is_read_from_the_start(tmp_path):
    log_file = _copy(tmp_path, "dmesg.log")
    state = tmp_path / "state.json"
    collector = KernelLogCollector(str(log_file), state)
    collector.collect()
    log_file.rename(tmp_path / "dmesg.log.1")
    log_file.write_text("[ 1.0] NVRM: Xid (PCI:0000:3b:00): 74, pid=1, name=x, NVLink: fatal error\n" * 40)
    events = collector.collect()
    assert [e["code"] for e in events] == [74] * 40
    assert collector.collect() == []


def test_events_are_bounded_per_collect_and_none_is_skipped(tmp_path):
    log_file = tmp_path / "kern.log"
    log_file.write_text("".join(f"[ {i}.0] NVRM: Xid (PCI:0000:3b:00): 13, pid={i}, name=x, n={i}\n"
                                for i in range(25)))
    state = tmp_path / "state.json"
    first = KernelLogCollector(str(log_file), state, max_events=10).collect()
    second = KernelLogCollector(str(log_file), state, max_events=10).collect()  # across a restart too
    collector = KernelLogCollector(str(log_file), state, max_events=10)
    third, fourth = collector.collect(), collector.collect()
    assert [len(first), len(second), len(third), len(fourth)] == [10, 10, 5, 0]
    pids = [int(e["message"].split("n=")[1]) for e in first + second + third]
    assert pids == list(range(25))


def test_missing_source_reports_one_agent_error_and_recovers(tmp_path, caplog):
    log_file = tmp_path / "not-yet.log"
    collector = KernelLogCollector(str(log_file), tmp_path / "state.json")
    with caplog.at_level("WARNING", logger="fleet_agent.collectors.kernel_log"):
        (error,) = collector.collect()
        assert collector.collect() == [] and collector.collect() == []
    assert set(error) == EVENT_KEYS
    assert (error["kind"], error["severity"], error["gpu_uuid"]) == ("agent_error", "warning", None)
    assert str(log_file) in error["message"] and error["at"]
    assert len([r for r in caplog.records if r.levelname == "WARNING"]) == 1
    log_file.write_text(XID_79 + "\n")
    assert _keys(collector.collect()) == [("xid", 79, "00000000:3B:00.0")]


def test_unreadable_source_is_an_agent_error_not_a_crash(tmp_path):
    # A directory fails to read as a log whoever runs the test (root ignores file modes).
    (error,) = KernelLogCollector(str(tmp_path), tmp_path / "state.json").collect()
    assert error["kind"] == "agent_error" and "IsADirectoryError" in error["raw"]


def test_unwritable_state_still_returns_events(tmp_path):
    log_file = _copy(tmp_path, "dmesg.log")
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a directory should be")
    events = KernelLogCollector(str(log_file), blocker / "state.json").collect()
    assert len(events) == len(DMESG_EXPECTED)


def test_corrupt_state_starts_over(tmp_path):
    log_file = _copy(tmp_path, "dmesg.log")
    state = tmp_path / "state.json"
    state.write_text("{not json")
    assert len(KernelLogCollector(str(log_file), state).collect()) == len(DMESG_EXPECTED)
    assert json.loads(state.read_text())["offset"] == log_file.stat().st_size


def test_dmesg_T_and_journal_files_keep_their_own_times(tmp_path, local_tz):
    local_tz("UTC")
    events = KernelLogCollector(str(_copy(tmp_path, "dmesg-T.log")), tmp_path / "a.json").collect()
    assert [(e["kind"], e["severity"], e["at"]) for e in events] == [
        ("xid", "critical", "2026-12-02T18:45:00Z"), ("aer", "critical", "2026-12-02T18:45:01Z")]
    events = KernelLogCollector(str(_copy(tmp_path, "journal-short-precise.log")), tmp_path / "b.json").collect()
    assert _keys(events) == [("xid", 94, "00000000:3B:00.0"), ("aer", None, "00000000:01:00.0"),
                             ("sxid", 11004, "00000000:05:00.0")]
    assert [e["at"][4:] for e in events] == ["-12-02T18:45:03Z", "-12-02T18:45:04Z", "-12-02T18:45:09Z"]


# --- /dev/kmsg -----------------------------------------------------------------------------------
@pytest.fixture
def proc_root(tmp_path):
    root = tmp_path / "proc"
    (root / "sys/kernel/random").mkdir(parents=True)
    (root / "sys/kernel/random/boot_id").write_text("3f1c2c1e-88e3-4a9a-a3c7-0c1b6d1f6d3e\n")
    (root / "stat").write_text("cpu  1 2 3 4 5 6 7 8 0 0\nbtime 1796169600\nprocesses 1\n")  # 2026-12-02T00:00Z
    return root


def test_kmsg_records_are_parsed_with_seq_tracking(tmp_path, proc_root):
    kmsg = _copy(tmp_path, "kmsg.txt")
    state = tmp_path / "kmsg.json"
    collector = KernelLogCollector("kmsg", state, {"0000:3b:00.0": UUID_3B}, kmsg_path=kmsg, proc_root=proc_root)
    events = collector.collect()
    assert _keys(events) == [("xid", 13, "00000000:3B:00.0"), ("aer", None, "00000000:B7:00.0"),
                             ("gpu_lost", None, "00000000:91:00.0"), ("xid", 79, "00000000:91:00.0")]
    assert events[0]["gpu_uuid"] == UUID_3B
    assert events[1]["severity"] == "info" and "Physical Layer" in events[1]["message"]
    # usec since boot + btime from <proc_root>/stat: 1843.1 s after midnight.
    assert events[0]["at"] == "2026-12-02T00:30:43Z"
    assert json.loads(state.read_text())["last_seq"] == 1026

    with kmsg.open("a") as fh:
        fh.write("2,1027,5000000000,-;NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=x, DBE\n")
    assert _keys(collector.collect()) == [("xid", 48, "00000000:3B:00.0")]  # the open reader continues
    restarted = KernelLogCollector("kmsg", state, kmsg_path=kmsg, proc_root=proc_root)
    assert restarted.collect() == []  # everything up to seq 1027 was reported already
    with kmsg.open("a") as fh:
        fh.write("2,1028,5000000001,-;NVRM: Xid (PCI:0000:3b:00): 64, pid=1, name=x, remap failure\n")
    assert [e["code"] for e in restarted.collect()] == [64]


def test_kmsg_after_a_reboot_starts_over(tmp_path, proc_root):
    kmsg = _copy(tmp_path, "kmsg.txt")
    state = tmp_path / "kmsg.json"
    KernelLogCollector("kmsg", state, kmsg_path=kmsg, proc_root=proc_root).collect()
    # New boot: sequence numbers restart below the saved one.
    (proc_root / "sys/kernel/random/boot_id").write_text("aaaaaaaa-0000-4000-8000-000000000000\n")
    kmsg.write_text("3,5,1000000,-;NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.\n")
    (event,) = KernelLogCollector("kmsg", state, kmsg_path=kmsg, proc_root=proc_root).collect()
    assert event["kind"] == "gpu_lost"


def test_kmsg_without_permission_is_one_agent_error(tmp_path, proc_root):
    collector = KernelLogCollector("kmsg", tmp_path / "kmsg.json", kmsg_path=tmp_path / "no-kmsg",
                                   proc_root=proc_root)
    (error,) = collector.collect()
    assert error["kind"] == "agent_error" and "kmsg" in error["message"]
    assert collector.collect() == []


def test_kmsg_fifo_nonblocking_read_returns_when_empty(tmp_path, proc_root):
    fifo = tmp_path / "kmsg-fifo"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # keep a writer so reads return EAGAIN, not EOF
    try:
        collector = KernelLogCollector("kmsg", tmp_path / "k.json", kmsg_path=fifo, proc_root=proc_root)
        started = time.monotonic()
        assert collector.collect() == []
        os.write(writer, b"3,7,1000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, off the bus\n")
        assert [e["code"] for e in collector.collect()] == [79]
        assert time.monotonic() - started < 2
        collector.close()
    finally:
        os.close(writer)


# --- journal -------------------------------------------------------------------------------------
FAKE_JOURNALCTL = """#!{python}
import pathlib, sys
calls = pathlib.Path({calls!r})
with calls.open("a") as fh:
    fh.write(" ".join(sys.argv[1:]) + "\\n")
mode = pathlib.Path({mode!r}).read_text().strip()
if mode == "fail":
    sys.stderr.write("Failed to get journal access: Permission denied\\n")
    sys.exit(1)
after = [a for a in sys.argv if a.startswith("--after-cursor=")]
if after and mode == "reject-cursor":
    sys.stderr.write("Failed to seek to cursor: Invalid argument\\n")
    sys.exit(1)
lines = pathlib.Path({lines!r}).read_text().splitlines()
start = int(after[0].split(";i=")[1]) if after else 0
for line in lines[start:]:
    print(line)
print("-- cursor: s=0b1e;i=%d" % len(lines))
"""


@pytest.fixture
def journal(tmp_path):
    lines = tmp_path / "journal.txt"
    shutil.copy(FIXTURES / "journal-short-precise.log", lines)
    calls, mode = tmp_path / "calls.txt", tmp_path / "mode.txt"
    mode.write_text("ok")
    script = tmp_path / "journalctl"
    script.write_text(FAKE_JOURNALCTL.format(python=sys.executable, calls=str(calls), mode=str(mode),
                                             lines=str(lines)))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {"cmd": str(script), "lines": lines, "calls": calls, "mode": mode}


def test_journal_source_uses_and_persists_the_cursor(tmp_path, journal):
    state = tmp_path / "journal-state.json"
    collector = KernelLogCollector("journal", state, journalctl=journal["cmd"])
    assert [e["code"] for e in collector.collect()] == [94, None, 11004]
    first_call = journal["calls"].read_text().splitlines()[0]
    assert "-k" in first_call and "short-precise" in first_call and "--show-cursor" in first_call
    assert "--after-cursor" not in first_call
    with journal["lines"].open("a") as fh:
        fh.write("Dec 02 18:46:00.000001 gpu-01 kernel: NVRM: Xid (PCI:0000:3b:00): 92, pid=1, name=x, SBE\n")
    restarted = KernelLogCollector("journal", state, journalctl=journal["cmd"])
    assert [e["code"] for e in restarted.collect()] == [92]
    assert journal["calls"].read_text().splitlines()[-1].endswith("--after-cursor=s=0b1e;i=5")
    assert restarted.collect() == []


def test_journal_rejecting_the_cursor_resumes_by_time(tmp_path, journal):
    state = tmp_path / "journal-state.json"
    KernelLogCollector("journal", state, journalctl=journal["cmd"]).collect()
    journal["mode"].write_text("reject-cursor")
    KernelLogCollector("journal", state, journalctl=journal["cmd"]).collect()
    assert "--since=@" in journal["calls"].read_text().splitlines()[-1]


def test_journal_failure_is_one_agent_error(tmp_path, journal):
    journal["mode"].write_text("fail")
    collector = KernelLogCollector("journal", tmp_path / "j.json", journalctl=journal["cmd"])
    (error,) = collector.collect()
    assert error["kind"] == "agent_error" and "Permission denied" in error["message"]
    assert collector.collect() == []
    journal["mode"].write_text("ok")
    assert len(collector.collect()) == 3


def test_journalctl_missing_is_one_agent_error(tmp_path):
    collector = KernelLogCollector("journal", tmp_path / "j.json", journalctl=str(tmp_path / "no-journalctl"))
    assert [e["kind"] for e in collector.collect()] == ["agent_error"]
    assert collector.collect() == []


def test_journal_backlog_is_kept_for_the_next_collect(tmp_path, journal):
    journal["lines"].write_text("".join(
        f"Dec 02 18:45:{i:02d}.000000 gpu-01 kernel: NVRM: Xid (PCI:0000:3b:00): 13, pid={i}, name=x, n={i}\n"
        for i in range(7)))
    state = tmp_path / "j.json"
    first = KernelLogCollector("journal", state, journalctl=journal["cmd"], max_events=3).collect()
    second = KernelLogCollector("journal", state, journalctl=journal["cmd"], max_events=3).collect()
    third = KernelLogCollector("journal", state, journalctl=journal["cmd"], max_events=3).collect()
    assert [int(e["message"].split("n=")[1]) for e in first + second + third] == list(range(7))
    assert [len(first), len(second), len(third)] == [3, 3, 1]


# --- one AER incident, two lines ------------------------------------------------------------------
RECEIVED = "[Wed Dec  2 18:45:01 2026] pcieport 0000:00:01.0: AER: Uncorrected (Non-Fatal) error received: 0000:01:00.0"
BUS_ERROR = ("[Wed Dec  2 18:45:01 2026] nvidia 0000:01:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), "
             "type=Transaction Layer, (Requester ID)")


def test_the_root_port_line_and_the_device_line_are_one_aer_event():
    [event] = coalesce_aer([parse_line(RECEIVED), parse_line(BUS_ERROR)])
    assert (event["kind"], event["pci_bus_id"], event["severity"]) == ("aer", "00000000:01:00.0", "critical")
    assert "Transaction Layer" in event["message"]
    assert event["raw"] == f"{RECEIVED}\n{BUS_ERROR}"


@pytest.mark.parametrize("second", [
    BUS_ERROR.replace("nvidia 0000:01:00.0", "nvidia 0000:02:00.0"),  # another device
    BUS_ERROR.replace("18:45:01", "18:45:09"),  # too far apart to be one incident
    RECEIVED,  # two incidents reported by the port
], ids=["other device", "later", "two received lines"])
def test_aer_lines_that_are_not_one_incident_stay_apart(second, local_tz):
    local_tz("UTC")
    assert len(coalesce_aer([parse_line(RECEIVED), parse_line(second)])) == 2


def test_an_event_between_the_two_lines_keeps_them_apart():
    xid = "[Wed Dec  2 18:45:01 2026] NVRM: Xid (PCI:0000:01:00): 79, pid=<unknown>, GPU has fallen off the bus."
    assert [e["kind"] for e in coalesce_aer([parse_line(RECEIVED), parse_line(xid), parse_line(BUS_ERROR)])] == [
        "aer", "xid", "aer"]


# --- a message split over lines ----------------------------------------------------------------------------------
# As a journal or a log file keeps it: the driver's "fallen off the bus" message over three lines, the address on the
# first only (dmesg from an on-premises fleet, driver 570.158.01: NVIDIA/NVSentinel issue #155,
# https://github.com/NVIDIA/NVSentinel/issues/155).
SPLIT_OFF_THE_BUS = """[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0
               NVRM: (PCI ID: 10de:26b5) installed in this system has
               NVRM: fallen off the bus and is not responding to commands.
[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).
"""


def test_a_split_off_the_bus_message_is_attributed_to_the_gpu_its_first_line_names(tmp_path):
    log_file = tmp_path / "kern.log"
    log_file.write_text(SPLIT_OFF_THE_BUS)
    collector = KernelLogCollector(str(log_file), tmp_path / "state.json")
    events = collector.collect()
    assert [(e["kind"], e["pci_bus_id"], e["severity"]) for e in events] == [
        ("gpu_lost", "00000000:B3:00.0", "critical")]
    assert "0000:b3:00.0 has fallen off the bus" in events[0]["message"]


def test_an_off_the_bus_line_that_names_no_gpu_is_kept_and_says_so(tmp_path):
    log_file = tmp_path / "kern.log"
    log_file.write_text("[  512.000001] NVRM: GPU has fallen off the bus.\n")
    (event,) = KernelLogCollector(str(log_file), tmp_path / "state.json").collect()
    assert event["kind"] == "gpu_lost" and event["pci_bus_id"] is None
    assert "unattributed" in event["message"]


# --- the public corpus ----------------------------------------------------------------------------------------------
CORPUS = json.loads((Path(__file__).parent / "fixtures/kernel_corpus/corpus.json").read_text())


def corpus_events(entry: dict, tmp_path: Path) -> list[dict]:
    """What the collector makes of one corpus entry, read as a log file (the format of dmesg and journal lines)."""
    path = tmp_path / f"corpus-{abs(hash(entry['source_url'] + entry['format']))}.log"
    path.write_text("\n".join(entry["lines"]) + "\n")
    events = KernelLogCollector(str(path), tmp_path / f"{path.name}.state").collect()
    return [{key: event.get(key) for key in want} for event, want in zip(events, entry["expect"], strict=False)] \
        + events[len(entry["expect"]):]


@pytest.mark.parametrize("entry", CORPUS["entries"], ids=[e["format"][:40] for e in CORPUS["entries"]])
def test_every_line_of_the_public_corpus_reads_as_an_operator_reads_it(entry, tmp_path):
    assert corpus_events(entry, tmp_path) == entry["expect"], entry["source_url"]
