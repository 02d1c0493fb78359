"""Kernel log collector: NVIDIA Xid, NVSwitch SXid, "fallen off the bus" and PCIe AER lines → events.

Sources: ``/dev/kmsg`` (needs root), ``journalctl -k`` or a plain file (``dmesg`` output, kern.log).
The position in the source is persisted after every read so a restarted agent never reports a line
twice. Nothing here raises: garbage lines are skipped, an unreadable source becomes one
``agent_error`` event.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import select
import stat as stat_module
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fleet_agent.protocol import normalize_pci_bus_id
from fleet_agent.timeutil import rfc3339, utc_now
from fleet_agent.xid import xid_decode, xid_info

log = logging.getLogger(__name__)

MAX_EVENTS_PER_COLLECT = 1000
MAX_PENDING_EVENTS = 10 * MAX_EVENTS_PER_COLLECT
MAX_READ_BYTES = 8 * 1024 * 1024
# /dev/kmsg hands out one record per read() and answers EINVAL when the buffer is smaller than the record; records
# are at most 8 KiB (CONSOLE_EXT_LOG_MAX) today, but the buffer grows on EINVAL rather than trusting that.
KMSG_READ_SIZE = 16384
KMSG_MAX_READ_SIZE = 1024 * 1024
STATE_VERSION = 1

# --- line prefixes -------------------------------------------------------------------------------
# /dev/kmsg: "priority,seq,usec,flags[,...];message"
_KMSG_PREFIX = re.compile(r"^(\d+),(\d+),(\d+),[^;]*;(.*)$", re.DOTALL)
# dmesg: "[ 1234.567890] "
_MONOTONIC_PREFIX = re.compile(r"^\[\s*\d+\.\d+\]\s?")
# dmesg -T: "[Mon Dec  2 18:45:00 2026] " (local time)
_CTIME_PREFIX = re.compile(r"^\[([A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d \d{4})\]\s?")
# journalctl -o short / short-precise, syslog: "Dec 02 18:45:00.123456 host kernel: " (local, no year)
_SYSLOG_PREFIX = re.compile(r"^([A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d(?:\.\d+)?) \S+ [^\s:]+: ")
# journalctl -o short-iso(-precise), rsyslog RFC 3339: "2026-12-02T18:45:00.123456+0000 host kernel: "
_ISO_PREFIX = re.compile(
    r"^(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?) \S+ [^\s:]+: "
)

# --- messages ------------------------------------------------------------------------------------
_BDF = r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
_XID = re.compile(r"NVRM: Xid \(((?:PCI:)?[0-9a-fA-F:.]+)\)[^:]*: (\d+)(?:,\s*|\s*$)(.*)")
_SXID = re.compile(
    r"(nvidia-nvswitch\d*)?:? ?SXid \(((?:PCI:)?[0-9a-fA-F:.]+)\)[^:]*: (\d+),\s*(Fatal|Non-fatal)\b,?\s*(.*)",
    re.IGNORECASE,
)
_FALLEN_OFF = re.compile(r"fallen off the bus", re.IGNORECASE)
# Require the domain here: a bare "18:45" could be a clock time.
_DOMAIN_BDF = re.compile(r"(?:PCI:)?([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)")
_AER_BUS_ERROR = re.compile(
    rf"({_BDF}): (?:AER: )?PCIe Bus Error: severity=([^,]+)(.*)", re.IGNORECASE
)
# "AER: Corrected error received: 0000:01:00.0" (older kernels) and "AER: Correctable error message received from
# 0000:01:00.0" (newer kernels' wording).
_AER_RECEIVED = re.compile(
    r"AER: ((?:Multiple )?(?:Corrected|Correctable|Uncorrected|Uncorrectable)(?: \((?:Non-)?Fatal\))?)"
    r" errors?(?: message)? received(?: from)?:?\s*(\S*)",
    re.IGNORECASE,
)
def _local_to_utc(naive: datetime) -> datetime:
    # A naive datetime's astimezone() interprets it in the host's local zone, which is the zone
    # dmesg -T and journalctl print in.
    return naive.astimezone(UTC)


def _syslog_time(text: str, now: datetime) -> datetime:
    """Syslog/journal stamps carry no year: take this year, or last year if that lies ahead."""
    local_now = now.astimezone()
    stamp = datetime.strptime(f"{local_now.year} {text.split('.')[0]}", "%Y %b %d %H:%M:%S")
    moment = _local_to_utc(stamp)
    if moment - now > timedelta(days=1):
        moment = _local_to_utc(stamp.replace(year=stamp.year - 1))
    return moment


def _split_prefix(line: str) -> tuple[str, datetime | None, dict | None]:
    """Strip any timestamp prefixes; return (message, absolute time or None, kmsg record fields)."""
    text = line.rstrip("\r\n")
    moment: datetime | None = None
    kmsg: dict | None = None
    match = _KMSG_PREFIX.match(text)
    if match:
        kmsg = {"priority": int(match.group(1)), "seq": int(match.group(2)), "usec": int(match.group(3))}
        text = match.group(4)
    for prefix in (_ISO_PREFIX, _SYSLOG_PREFIX, _CTIME_PREFIX):
        match = prefix.match(text)
        if not match:
            continue
        try:
            if prefix is _ISO_PREFIX:
                parsed = datetime.fromisoformat(match.group(1))
                moment = parsed.astimezone(UTC) if parsed.tzinfo else _local_to_utc(parsed)
            elif prefix is _SYSLOG_PREFIX:
                moment = _syslog_time(match.group(1), utc_now())
            else:
                moment = _local_to_utc(datetime.strptime(match.group(1), "%a %b %d %H:%M:%S %Y"))
        except ValueError:
            moment = None
        text = text[match.end():]
        break
    text = _MONOTONIC_PREFIX.sub("", text, count=1)
    return text, moment, kmsg


def _event(kind: str, moment: datetime | None, pci: str | None, code: int | None, severity: str,
           message: str, raw: str) -> dict:
    return {
        "kind": kind,
        "at": rfc3339(moment) if moment else None,
        "gpu_uuid": None,
        "pci_bus_id": normalize_pci_bus_id(pci),
        "code": code,
        "severity": severity,
        "message": message,
        "raw": raw,
    }


def _aer_severity(text: str) -> str:
    lowered = text.lower()
    if "uncorrect" in lowered:
        return "warning" if "non-fatal" in lowered else "critical"
    if "correct" in lowered:
        return "info"
    return "warning"


def _parse_message(text: str, moment: datetime | None, raw: str) -> dict | None:
    match = _XID.search(text)
    if match:
        code = int(match.group(2))
        info = xid_info(code)
        detail = match.group(3).strip()
        decoded = xid_decode(code, detail)  # what the line says beyond its code (NVLink5 sub-code, Xid 154)
        severity = decoded["severity"] if decoded else info["severity"]
        message = f"Xid {code} ({info['meaning']})" + (f": {detail}" if detail else "")
        return _event("xid", moment, match.group(1).removeprefix("PCI:"), code, severity, message, raw)
    match = _SXID.search(text)
    if match:
        switch, pci, code, fatality, detail = match.groups()
        fatal = fatality.lower() == "fatal"
        where = f" on {switch}" if switch else ""
        message = f"SXid {code} ({'fatal' if fatal else 'non-fatal'}){where}: {detail.strip()}".rstrip(": ")
        return _event("sxid", moment, pci.removeprefix("PCI:"), int(code),
                      "critical" if fatal else "warning", message, raw)
    if _FALLEN_OFF.search(text):
        bdf = _DOMAIN_BDF.search(text)
        # Without an address (a journal or log file splits the driver's message over lines) the event is kept and
        # the collector names the GPU from an earlier line of the same message (Burst), or says it cannot.
        return _event("gpu_lost", moment, bdf.group(1) if bdf else None, None, "critical", text.strip(), raw)
    match = _AER_BUS_ERROR.search(text)
    if match:
        bdf, severity_text, rest = match.groups()
        message = f"PCIe AER {severity_text.strip()} error{rest.rstrip()}"
        return _event("aer", moment, bdf, None, _aer_severity(severity_text), message, raw)
    match = _AER_RECEIVED.search(text)
    if match:
        severity_text, source = match.groups()
        message = f"PCIe AER {severity_text} error received" + (f" from {source}" if source else "")
        if not _DOMAIN_BDF.fullmatch(source or ""):
            # Older kernels name the source by its PCIe requester id ("id=00e5": bus 0x00, device 0x1c, function 5)
            # in the reporting port's domain.
            port = _DOMAIN_BDF.search(text[:match.start()])
            requester = re.fullmatch(r"id=([0-9a-fA-F]{2})([0-9a-fA-F]{2})", source or "")
            if requester and port:
                devfn = int(requester.group(2), 16)
                source = f"{port.group(1).split(':')[0]}:{requester.group(1)}:{devfn >> 3:02x}.{devfn & 7}"
            else:
                source = port.group(1) if port else None
        return _event("aer", moment, source, None, _aer_severity(severity_text), message, raw)
    return None


AER_PAIR_WINDOW = timedelta(seconds=2)
_SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}


def coalesce_aer(events: list[dict]) -> list[dict]:
    """One PCIe AER incident is printed twice: the root port's ``AER: … error received: <device>`` and then the
    device's own ``<device>: PCIe Bus Error: severity=…, type=…``. Keep one event per incident: the device's
    (it names the error type), at the worse of the two severities, with both lines as ``raw``. A pair split
    across two reads stays two events."""
    merged: list[dict] = []
    for event in events:
        previous = merged[-1] if merged else None
        if (
            previous is not None
            and previous["kind"] == event["kind"] == "aer"
            and previous["pci_bus_id"] is not None
            and previous["pci_bus_id"] == event["pci_bus_id"]
            and _AER_RECEIVED.search(previous["raw"])
            and _AER_BUS_ERROR.search(event["raw"])
            and _close_in_time(previous["at"], event["at"])
        ):
            worse = max(previous["severity"], event["severity"], key=lambda s: _SEVERITY_RANK.get(s, 1))
            merged[-1] = {**event, "at": previous["at"] or event["at"], "severity": worse,
                          "raw": f"{previous['raw']}\n{event['raw']}"}
            continue
        merged.append(event)
    return merged


def _close_in_time(first: str | None, second: str | None) -> bool:
    if first is None or second is None:  # lines without a time stamp: adjacency is all there is
        return True
    try:
        a, b = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (first, second))
    except ValueError:
        return False
    return abs(b - a) <= AER_PAIR_WINDOW


# Lines of a driver message that name the GPU the next lines are about: the first line of the split "fallen off
# the bus" message ("NVRM: The NVIDIA GPU 0000:b3:00.0"), the line older drivers print before an Xid
# ("NVRM: GPU at PCI:0000:01:00: GPU-34d7…"), and an Xid line itself.
_NAMES_GPU = re.compile(r"NVRM: (?:The NVIDIA GPU |GPU at (?:PCI:)?|Xid \((?:PCI:)?)"
                        r"([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)")
BURST_LINES = 6  # how many lines after the naming one a message without an address is still attributed to it


class Burst:
    """Attributes an event whose line names no GPU to the GPU an earlier line of the same message named (within
    BURST_LINES lines); says "unattributed" otherwise. One per source: lines arrive in order."""

    def __init__(self):
        self._named: str | None = None
        self._since = BURST_LINES + 1

    def see(self, line: str, event: dict | None) -> dict | None:
        named = _NAMES_GPU.search(line)
        if named:
            self._named, self._since = named.group(1), 0
        else:
            self._since += 1
        if event is not None and event["kind"] == "gpu_lost" and event["pci_bus_id"] is None:
            if self._named is not None and self._since <= BURST_LINES:
                event["pci_bus_id"] = normalize_pci_bus_id(self._named)
                event["message"] = f"NVRM: the NVIDIA GPU {self._named} has {event['message'].split('NVRM: ')[-1]}"
            else:
                event["message"] += " (unattributed: no line of the same message names the GPU)"
        return event


def _parse(line: str) -> tuple[dict | None, dict | None]:
    text, moment, kmsg = _split_prefix(line)
    return _parse_message(text, moment, line.rstrip("\r\n")), kmsg


def parse_line(line: str) -> dict | None:
    """One kernel log line → an event dict (see docs/agent-protocol.md), or None if it is not one."""
    try:
        if not isinstance(line, str) or not line.strip():
            return None
        return _parse(line)[0]
    except Exception:  # a parser bug must cost one line, not the agent
        log.debug("unparseable kernel log line %r", line, exc_info=True)
        return None


class _SourceError(Exception):
    pass


class KernelLogCollector:
    """Reads new kernel log lines from ``source`` ("kmsg", "journal" or a file path) and parses them."""

    def __init__(
        self,
        source: str,
        state_path: Path,
        pci_to_uuid: dict[str, str] | None = None,
        *,
        kmsg_path: str | os.PathLike = "/dev/kmsg",
        proc_root: str | os.PathLike = "/proc",
        journalctl: str | list[str] = "journalctl",
        timeout_s: float = 10.0,
        max_events: int = MAX_EVENTS_PER_COLLECT,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.source = str(source)
        # Lines without an absolute time are stamped when observed; the simulator passes its own clock.
        self._clock = clock
        self.state_path = Path(state_path)
        self.kmsg_path = str(kmsg_path)
        self.proc_root = Path(proc_root)
        self.journalctl = [journalctl] if isinstance(journalctl, str) else list(journalctl)
        self.timeout_s = timeout_s
        self.max_events = max(1, int(max_events))
        self._pci_map: dict[str, str] = {}
        self._burst = Burst()
        self.set_pci_map(pci_to_uuid or {})
        self._source_key = self.source if self.source in ("kmsg", "journal") else f"file:{self.source}"
        self._state = self._load_state()
        self._saved = dict(self._state)
        self._error_reported = False
        self._save_warned = False
        self._kmsg_fd: int | None = None
        self._kmsg_buffer = b""
        self._kmsg_read_size = KMSG_READ_SIZE
        self._kmsg_poll: select.poll | None = None
        self._kmsg_gap = False  # an EPIPE (ring buffer overrun) since the last record read
        self._boot_time: float | None = None
        self.lost_records = 0  # records the ring buffer overwrote before this reader got them (since start)

    # --- public ---------------------------------------------------------------------------------
    def set_pci_map(self, mapping: dict[str, str]) -> None:
        self._pci_map = {}
        for bus_id, uuid in (mapping or {}).items():
            normalized = normalize_pci_bus_id(bus_id)
            if normalized and uuid:
                self._pci_map[normalized] = uuid

    def collect(self) -> list[dict]:
        now = self._clock()
        try:
            if self.source == "kmsg":
                events = self._read_kmsg()
            elif self.source == "journal":
                events = self._read_journal()
            else:
                events = self._read_file()
        except Exception as exc:  # unreadable source: report once, keep the agent alive
            self._close_kmsg()
            return self._source_error(exc, now)
        if self._error_reported:
            log.info("kernel log source %s readable again", self.source)
        self._error_reported = False
        self._save_state()
        events = coalesce_aer(events)
        for event in events:
            if event["at"] is None:
                event["at"] = rfc3339(now)
            if event["pci_bus_id"] and event["gpu_uuid"] is None:
                event["gpu_uuid"] = self._pci_map.get(event["pci_bus_id"])
        return events

    def close(self) -> None:
        self._close_kmsg()

    def wait(self, timeout_s: float) -> bool | None:
        """Block until the kernel log has something new, at most ``timeout_s``: True when it has, False when the
        time ran out. None when this source cannot be waited on (a journal, a plain file, or /dev/kmsg that
        cannot be opened): the caller polls it on a timer instead.

        Only /dev/kmsg (a character device) and a FIFO yielding kmsg records (tests and benchmarks stand in for
        /dev/kmsg with one) can be waited on: poll() on a regular file always says "readable"."""
        if self.source != "kmsg":
            return None
        if self._kmsg_poll is None:
            try:
                self._open_kmsg()
                mode = os.fstat(self._kmsg_fd).st_mode
            except OSError as exc:
                log.debug("cannot wait on %s: %s", self.kmsg_path, exc)
                self._close_kmsg()
                return None
            if not (stat_module.S_ISCHR(mode) or stat_module.S_ISFIFO(mode)):
                return None
            poller = select.poll()
            poller.register(self._kmsg_fd, select.POLLIN | select.POLLPRI)
            self._kmsg_poll = poller
        if self._kmsg_buffer.find(b"\n") >= 0:
            return True  # a record is already buffered
        try:
            ready = self._kmsg_poll.poll(max(0.0, timeout_s) * 1000)
        except OSError:
            return False
        for _fd, mask in ready:
            if mask & (select.POLLIN | select.POLLPRI):
                return True  # POLLERR|POLLPRI with POLLIN = an overrun: the read answers EPIPE, handled there
        if ready:  # POLLHUP/POLLERR alone: a FIFO whose writer went away; do not spin
            time.sleep(max(0.0, timeout_s))
        return False

    # --- state ----------------------------------------------------------------------------------
    def _load_state(self) -> dict:
        try:
            state = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable kernel log state %s: %s", self.state_path, exc)
            return {}
        if not isinstance(state, dict) or state.get("source") != self._source_key:
            return {}
        return state

    def _save_state(self) -> None:
        self._state.update(version=STATE_VERSION, source=self._source_key)
        if self._state == self._saved:
            return
        tmp = self.state_path.with_name(f".{self.state_path.name}.tmp")
        try:
            self.state_path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "w") as fh:
                json.dump(self._state, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.state_path)
        except OSError as exc:
            if not self._save_warned:
                log.warning("cannot save kernel log position to %s: %s", self.state_path, exc)
                self._save_warned = True
            return
        self._saved = json.loads(json.dumps(self._state))

    def _source_error(self, exc: Exception, now: datetime) -> list[dict]:
        if self._error_reported:
            log.debug("kernel log source %s still unreadable: %s", self.source, exc)
            return []
        self._error_reported = True
        log.warning("kernel log source %s unreadable: %s", self.source, exc)
        return [{
            "kind": "agent_error",
            "at": rfc3339(now),
            "gpu_uuid": None,
            "pci_bus_id": None,
            "code": None,
            "severity": "warning",
            "message": f"kernel log source {self.source} unreadable: {exc}",
            "raw": f"{type(exc).__name__}: {exc}",
        }]

    # --- file -----------------------------------------------------------------------------------
    def _read_file(self) -> list[dict]:
        events: list[dict] = []
        with open(self.source, "rb") as fh:
            stat = os.fstat(fh.fileno())
            offset = int(self._state.get("offset", 0))
            head_len = min(int(self._state.get("head_len", 0)), stat.st_size)
            same_file = (
                self._state.get("inode") == stat.st_ino
                and stat.st_size >= offset
                and _digest(fh, head_len) == self._state.get("head")
            )
            if not same_file:
                if self._state:
                    log.info("kernel log %s was rotated or truncated; reading from the start", self.source)
                offset = 0
            fh.seek(offset)
            read = 0
            while len(events) < self.max_events and read < MAX_READ_BYTES:
                line = fh.readline()
                if not line.endswith(b"\n"):
                    break  # end of file, or a line still being written
                read += len(line)
                offset += len(line)
                text = line.decode("utf-8", "replace")
                event = self._burst.see(text, parse_line(text))
                if event:
                    events.append(event)
            head_len = min(256, offset)
            self._state.update(inode=stat.st_ino, offset=offset, head_len=head_len,
                               head=_digest(fh, head_len))
        return events

    # --- /dev/kmsg ------------------------------------------------------------------------------
    def _open_kmsg(self) -> None:
        """Open once: a new boot starts from its first record, the same boot resumes after the saved sequence
        number (records up to it are skipped as they are read back)."""
        if self._kmsg_fd is not None:
            return
        boot_id = self._boot_id()
        if boot_id != self._state.get("boot_id"):
            self._state.update(boot_id=boot_id, last_seq=-1)
        self._boot_time = self._read_boot_time()
        self._kmsg_fd = os.open(self.kmsg_path, os.O_RDONLY | os.O_NONBLOCK)
        self._kmsg_buffer = b""

    def _read_kmsg(self) -> list[dict]:
        self._open_kmsg()
        last_seq = int(self._state.get("last_seq", -1))
        events: list[dict] = []
        read = 0
        while len(events) < self.max_events:
            newline = self._kmsg_buffer.find(b"\n")
            if newline < 0:
                if read >= MAX_READ_BYTES:
                    break
                try:
                    chunk = os.read(self._kmsg_fd, self._kmsg_read_size)
                except BlockingIOError:
                    break  # no more records for now
                except OSError as exc:
                    if exc.errno == errno.EPIPE:  # the ring buffer overwrote records we had not read
                        self._kmsg_gap = True
                        continue
                    if exc.errno == errno.EINVAL and self._kmsg_read_size < KMSG_MAX_READ_SIZE:
                        self._kmsg_read_size *= 2  # a record longer than the buffer
                        continue
                    raise
                if not chunk:
                    break  # a regular file (tests, a saved dump) at its end
                read += len(chunk)
                self._kmsg_buffer += chunk
                continue
            record = self._kmsg_buffer[:newline].decode("utf-8", "replace")
            self._kmsg_buffer = self._kmsg_buffer[newline + 1:]
            if record.startswith(" "):
                continue  # continuation line (KEY=value dictionary) of the previous record
            try:
                event, kmsg = _parse(record)
                event = self._burst.see(record, event)
            except Exception:
                log.debug("unparseable kmsg record %r", record, exc_info=True)
                continue
            if kmsg is None or kmsg["seq"] <= last_seq:
                continue
            if self._kmsg_gap or (last_seq >= 0 and kmsg["seq"] > last_seq + 1):
                # EPIPE, or (after a restart) the records since the saved position are no longer in the ring
                events.append(self._gap_event(last_seq, kmsg["seq"], kmsg["seq"] - last_seq - 1 if last_seq >= 0
                                              else 0))
                self._kmsg_gap = False
            last_seq = kmsg["seq"]
            if event:
                if event["at"] is None and self._boot_time is not None:
                    moment = datetime.fromtimestamp(self._boot_time + kmsg["usec"] / 1e6, UTC)
                    event["at"] = rfc3339(moment)
                events.append(event)
        self._state["last_seq"] = last_seq
        return events

    def _gap_event(self, last_seq: int, seq: int, lost: int) -> dict:
        """The ring buffer overwrote records before this reader got them: say so (an Xid may be among them)."""
        self.lost_records += max(lost, 0)
        what = f"{lost} record(s) (sequence {last_seq + 1} to {seq - 1})" if lost > 0 else "some records"
        log.warning("kernel ring buffer overran: %s lost before the agent read them", what)
        return {"kind": "agent_error", "at": rfc3339(self._clock()), "gpu_uuid": None, "pci_bus_id": None,
                "code": None, "severity": "warning",
                "message": f"kernel log: the ring buffer overran and {what} were lost before the agent read them",
                "raw": f"kmsg EPIPE before sequence {seq}"}

    def _close_kmsg(self) -> None:
        self._kmsg_poll = None
        if self._kmsg_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._kmsg_fd)
            self._kmsg_fd = None

    def _boot_id(self) -> str | None:
        try:
            return (self.proc_root / "sys/kernel/random/boot_id").read_text().strip() or None
        except OSError:
            boot_time = self._read_boot_time()
            return f"btime:{int(boot_time)}" if boot_time is not None else None

    def _read_boot_time(self) -> float | None:
        try:
            with open(self.proc_root / "stat") as fh:
                for line in fh:
                    if line.startswith("btime "):
                        return float(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
        return None

    # --- journal --------------------------------------------------------------------------------
    def _read_journal(self) -> list[dict]:
        base = [*self.journalctl, "-k", "-o", "short-precise", "--no-pager", "--show-cursor"]
        cursor = self._state.get("cursor")
        checked_at = self._clock()
        proc = self._run_journalctl([*base, f"--after-cursor={cursor}"] if cursor else base)
        if proc.returncode != 0 and cursor:
            log.warning("journalctl rejected the saved cursor (%s); resuming from the last check time",
                        proc.stderr.strip()[:200])
            since = self._state.get("checked_at")
            proc = self._run_journalctl([*base, f"--since=@{int(since)}"] if since else base)
        if proc.returncode != 0:
            raise _SourceError(f"journalctl exited {proc.returncode}: {proc.stderr.strip()[:500]}")
        events = list(self._state.get("pending", []))
        for line in proc.stdout.splitlines():
            if line.startswith("-- cursor: "):
                self._state["cursor"] = line[len("-- cursor: "):].strip()
            elif not line.startswith("-- "):
                event = self._burst.see(line, parse_line(line))
                if event:
                    events.append(event)
        self._state["checked_at"] = checked_at.timestamp()
        if len(events) - self.max_events > MAX_PENDING_EVENTS:
            dropped = len(events) - self.max_events - MAX_PENDING_EVENTS
            log.warning("kernel log event backlog too long; dropping the %d oldest events", dropped)
            events = events[dropped:]
        self._state["pending"] = events[self.max_events:]
        return events[: self.max_events]

    def _run_journalctl(self, cmd: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=self.timeout_s,
                              check=False)


def _digest(fh, length: int) -> str:
    position = fh.tell()
    fh.seek(0)
    data = fh.read(length)
    fh.seek(position)
    return hashlib.sha256(data).hexdigest()
