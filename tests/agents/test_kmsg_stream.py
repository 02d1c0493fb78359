"""Reading the kernel log as it is written: the watcher blocks on /dev/kmsg (here a FIFO yielding kmsg records,
since writing to the real /dev/kmsg needs root) and an urgent line leaves in a report at once, not at the next
poll; ring-buffer overruns are reported as a gap; sources that cannot be waited on fall back to polling."""

from __future__ import annotations

import errno
import os
import threading
import time

import pytest

from fleet_agent.client import ControlPlaneClient
from fleet_agent.collectors import kernel_log as kernel_log_module
from fleet_agent.collectors.kernel_log import KernelLogCollector
from fleet_agent.credentials import credential_path
from fleet_agent.daemon import Daemon
from fleet_agent.enroll import enroll
from tests.agents.test_daemon import _config, _wait_for, running
from tests.agents.test_sender import FACTS

XID_79 = b"3,%d,5000000,-;NVRM: Xid (PCI:0000:18:00): 79, pid=<unknown>, name=<unknown>, GPU has fallen off the bus.\n"


@pytest.fixture
def proc_root(tmp_path):
    root = tmp_path / "proc"
    (root / "sys/kernel/random").mkdir(parents=True)
    (root / "sys/kernel/random/boot_id").write_text("3f1c2c1e-88e3-4a9a-a3c7-0c1b6d1f6d3e\n")
    (root / "stat").write_text("cpu  1 2 3 4 5 6 7 8 0 0\nbtime 1796169600\nprocesses 1\n")
    return root


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "kmsg"
    os.mkfifo(path)
    writer = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # held open, as the kernel holds /dev/kmsg
    yield path, writer
    os.close(writer)


def test_wait_blocks_until_a_record_is_written_then_returns_at_once(tmp_path, proc_root, fifo):
    path, writer = fifo
    collector = KernelLogCollector("kmsg", tmp_path / "k.json", kmsg_path=path, proc_root=proc_root)
    assert collector.wait(0.05) is False  # nothing written: the wait times out
    threading.Timer(0.2, lambda: os.write(writer, XID_79 % 7)).start()
    started = time.monotonic()
    assert collector.wait(10) is True
    assert time.monotonic() - started < 5  # woken by the write, not by the 10 s timeout
    assert [e["code"] for e in collector.collect()] == [79]
    assert collector.wait(0.05) is False  # consumed
    collector.close()


def test_sources_that_cannot_be_waited_on_say_so(tmp_path, proc_root):
    plain = tmp_path / "kern.log"
    plain.write_text("")
    assert KernelLogCollector(str(plain), tmp_path / "a.json").wait(0.01) is None
    assert KernelLogCollector("journal", tmp_path / "b.json").wait(0.01) is None
    # /dev/kmsg stand-in that is a regular file: poll() would always say "readable", so it is polled instead
    assert KernelLogCollector("kmsg", tmp_path / "c.json", kmsg_path=plain, proc_root=proc_root).wait(0.01) is None
    # no permission / no such device: polled (and the collector reports the unreadable source once)
    missing = KernelLogCollector("kmsg", tmp_path / "d.json", kmsg_path=tmp_path / "nope", proc_root=proc_root)
    assert missing.wait(0.01) is None
    assert missing.collect()[0]["kind"] == "agent_error"


def test_an_overrun_is_reported_as_a_gap_and_reading_goes_on(tmp_path, proc_root, fifo, monkeypatch):
    path, writer = fifo
    collector = KernelLogCollector("kmsg", tmp_path / "k.json", kmsg_path=path, proc_root=proc_root)
    os.write(writer, XID_79 % 10)
    assert [e["code"] for e in collector.collect()] == [79]
    real_read, calls = os.read, {"n": 0}

    def read_with_epipe(fd, size):
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(errno.EPIPE, "Broken pipe")  # what /dev/kmsg answers after the ring overwrote records
        return real_read(fd, size)

    monkeypatch.setattr(kernel_log_module.os, "read", read_with_epipe)
    os.write(writer, XID_79 % 15)
    gap, xid = collector.collect()
    assert gap["kind"] == "agent_error" and gap["severity"] == "warning"
    assert "4 record(s) (sequence 11 to 14)" in gap["message"] and collector.lost_records == 4
    assert xid["code"] == 79
    collector.close()


def test_a_record_longer_than_the_buffer_grows_it(tmp_path, proc_root, fifo, monkeypatch):
    path, writer = fifo
    collector = KernelLogCollector("kmsg", tmp_path / "k.json", kmsg_path=path, proc_root=proc_root)
    real_read = os.read

    def small_buffer_einval(fd, size):
        if size < 32768:
            raise OSError(errno.EINVAL, "Invalid argument")  # /dev/kmsg: the record does not fit
        return real_read(fd, size)

    monkeypatch.setattr(kernel_log_module.os, "read", small_buffer_einval)
    os.write(writer, XID_79 % 3)
    assert [e["code"] for e in collector.collect()] == [79]
    collector.close()


def test_daemon_streams_kmsg_and_sends_an_xid_without_the_timer(control_plane, tmp_path, sim_nvml, fifo):
    path, writer = fifo
    enroll(ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=credential_path(tmp_path))
    daemon = Daemon(_config(tmp_path, interval_s="60", kernel_log=f"kmsg:{path}", notice_poll_s="5"),
                    nvml_module=sim_nvml)
    timer_polls = []
    # The timer's poll (every notice_poll_s) is switched off: only the streaming read can deliver the Xid.
    daemon.core.collect_if_urgent = lambda: timer_polls.append(time.monotonic())
    with running(daemon):
        assert _wait_for(lambda: control_plane.sequences()), "no first report"
        os.write(writer, XID_79 % 42)
        assert _wait_for(lambda: any(r["events"] for r in control_plane.reports()), timeout=10)
    urgent = next(r for r in control_plane.reports() if r["events"])
    assert urgent["events"][0]["code"] == 79 and urgent["events"][0]["gpu_uuid"] == sim_nvml.gpus[0].uuid


def test_daemon_falls_back_to_the_timer_where_the_log_cannot_be_waited_on(control_plane, tmp_path, sim_nvml):
    enroll(ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=credential_path(tmp_path))
    kernel_log = tmp_path / "kern.log"
    kernel_log.write_text("")
    daemon = Daemon(_config(tmp_path, interval_s="60", kernel_log=str(kernel_log), notice_poll_s="0.5"),
                    nvml_module=sim_nvml)
    assert daemon.core.wait_kernel_log(0.01) is None  # a plain file: polled
    with running(daemon):
        assert _wait_for(lambda: control_plane.sequences()), "no first report"
        with kernel_log.open("a") as handle:
            handle.write("[ 99.1] NVRM: Xid (PCI:0000:18:00): 79, pid=<unknown>, name=<unknown>, GPU has fallen off "
                         "the bus.\n")
        assert _wait_for(lambda: any(r["events"] for r in control_plane.reports()), timeout=10)
