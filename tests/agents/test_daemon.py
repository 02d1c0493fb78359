"""``fleet-agent run`` in-process: schedule, urgent push, shutdown flush."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from fleet_agent.client import ControlPlaneClient
from fleet_agent.config import load_config
from fleet_agent.credentials import credential_path
from fleet_agent.daemon import Daemon
from fleet_agent.enroll import enroll
from fleet_agent.spool import read_spool_state
from tests.agents.conftest import FIXTURES
from tests.agents.test_sender import FACTS


def _wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


@contextmanager
def running(daemon):
    """``daemon.run()`` in a thread; on leaving, stop it and check it shut down (flushing the spool)."""
    runner = threading.Thread(target=daemon.run)
    runner.start()
    try:
        yield
    finally:
        daemon.stop_event.set()
        runner.join(timeout=15)
    assert not runner.is_alive()


def _config(tmp_path, **flags):
    base = {
        "state_dir": str(tmp_path),
        "cloud": "none",
        "proc_root": str(FIXTURES / "proc" / "t0"),
        "host_root": str(FIXTURES / "host"),
        "kernel_log": "off",
    }
    return load_config(config_file=None, environ={}, flags=base | flags)


def test_daemon_reports_on_schedule_and_pushes_an_xid_at_once(control_plane, tmp_path, sim_nvml):
    enroll(ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=credential_path(tmp_path))
    kernel_log = tmp_path / "kern.log"
    kernel_log.write_text("[ 10.000000] Linux version 5.15.0\n")
    daemon = Daemon(
        _config(tmp_path, interval_s="60", kernel_log=str(kernel_log), notice_poll_s="0.5"),
        nvml_module=sim_nvml,
    )
    with running(daemon):
        assert _wait_for(lambda: control_plane.sequences()), "no first report"
        first = control_plane.reports()[0]
        assert first["node"]["node_id"] == 1 and first["interval_s"] == 60 and len(first["gpus"]) == 8
        with kernel_log.open("a") as handle:
            handle.write(
                "[ 99.123456] NVRM: Xid (PCI:0000:18:00): 79, pid=<unknown>, name=<unknown>, "
                "GPU has fallen off the bus.\n"
            )
        # The interval is a minute: only the urgent path can deliver this within seconds.
        assert _wait_for(lambda: any(r["events"] for r in control_plane.reports()), timeout=5)
    urgent = next(r for r in control_plane.reports() if r["events"])
    assert urgent["events"][0]["code"] == 79 and urgent["events"][0]["gpu_uuid"] == sim_nvml.gpus[0].uuid
    assert read_spool_state(tmp_path / "spool.db")["depth"] == 0  # flushed on the way out


def test_daemon_without_enrolment_keeps_every_report_in_the_spool(tmp_path, sim_nvml):
    daemon = Daemon(_config(tmp_path, interval_s="1"), nvml_module=sim_nvml)
    assert daemon.run(max_cycles=2) == 0
    state = read_spool_state(tmp_path / "spool.db")
    assert state["depth"] == 2 and state["last_sequence"] == 2  # kept for later, nothing lost


def test_interval_comes_from_the_server_unless_configured(control_plane, tmp_path, sim_nvml):
    control_plane.interval_s = 30
    enroll(ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=credential_path(tmp_path))
    assert Daemon(_config(tmp_path), nvml_module=sim_nvml).interval_s == 30
    assert Daemon(_config(tmp_path, interval_s="5"), nvml_module=sim_nvml).interval_s == 5


def test_daemon_sets_a_poison_report_aside_after_the_configured_server_errors(control_plane, tmp_path, sim_nvml):
    from tests.agents.test_sender import _poison, _spool_with_poison

    enroll(ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=credential_path(tmp_path))
    spool, _ = _spool_with_poison(tmp_path, reports=1, poison_at=1)  # left over from before a restart
    spool.close()
    control_plane.refuse(_poison, 500)
    daemon = Daemon(_config(tmp_path, interval_s="60", max_server_errors="1"), nvml_module=sim_nvml)
    assert daemon.run(max_cycles=1) == 0  # one report of its own, then the shutdown flush
    state = read_spool_state(tmp_path / "spool.db")
    assert state["depth"] == 0 and state["rejected"] == 1 and state["last_rejection"]["sequence"] == 1
    assert control_plane.sequences(state["instance_id"]) == [2]
