"""NVML's Xid events (``XidEventWatcher``) over the simulated pynvml, and the daemon thread that reports them."""

from __future__ import annotations

import threading

import pynvml
import pytest

from fleet_agent.client import ControlPlaneClient
from fleet_agent.credentials import credential_path
from fleet_agent.daemon import Daemon
from fleet_agent.enroll import enroll
from fleet_agent.nvml import NvmlAdapter, XidEventWatcher
from fleet_agent.simnvml import SimulatedGpu, SimulatedNvml
from tests.agents.test_daemon import _config, _wait_for, running
from tests.agents.test_sender import FACTS


@pytest.fixture
def watcher(sim_nvml):
    watcher = XidEventWatcher(NvmlAdapter(sim_nvml))
    yield watcher
    watcher.close()


def test_an_xid_arrives_with_its_gpu_code_and_catalog_severity(watcher, sim_nvml):
    assert watcher.open() == 8
    assert watcher.wait(10) == []  # nothing happened: the real NVMLError_Timeout, caught
    sim_nvml.emit_xid(sim_nvml.gpus[2], 79)
    [event] = watcher.wait(1000)
    assert (event["kind"], event["code"], event["severity"]) == ("xid", 79, "critical")
    assert event["gpu_uuid"] == sim_nvml.gpus[2].uuid
    assert event["pci_bus_id"] == sim_nvml.gpus[2].bus_id
    assert "NVML" in event["message"] and event["at"].endswith("Z")


def test_a_burst_comes_back_in_one_wait(watcher, sim_nvml):
    watcher.open()
    sim_nvml.emit_xid(sim_nvml.gpus[0], 13)
    sim_nvml.emit_xid(sim_nvml.gpus[5], 31)
    assert [(e["code"], e["gpu_uuid"]) for e in watcher.wait(1000)] == [(13, sim_nvml.gpus[0].uuid),
                                                                       (31, sim_nvml.gpus[5].uuid)]


def test_a_gpu_that_fell_off_the_bus_is_still_named(watcher, sim_nvml):
    watcher.open()
    gpu = sim_nvml.gpus[4]
    sim_nvml.emit_xid(gpu, 79)
    gpu.lost = True  # NVML can no longer be asked for its uuid: it was learnt at registration
    [event] = watcher.wait(1000)
    assert event["gpu_uuid"] == gpu.uuid


def test_a_waiting_thread_wakes_when_the_event_comes(watcher, sim_nvml):
    watcher.open()
    got = []
    waiter = threading.Thread(target=lambda: got.extend(watcher.wait(5000)))
    waiter.start()
    sim_nvml.emit_xid(sim_nvml.gpus[1], 48)
    waiter.join(timeout=5)
    assert [e["code"] for e in got] == [48]


def test_gpus_without_the_event_type_are_skipped():
    gpus = [SimulatedGpu.from_model("H100-SXM-80GB", i, node_key="t") for i in range(3)]
    gpus[1].unsupported.add("events")
    nvml = SimulatedNvml(gpus)
    watcher = XidEventWatcher(NvmlAdapter(nvml))
    assert watcher.open() == 2
    nvml.emit_xid(gpus[1], 13)  # not registered: nothing arrives
    nvml.emit_xid(gpus[2], 13)
    assert [e["gpu_uuid"] for e in watcher.wait(1000)] == [gpus[2].uuid]


@pytest.mark.parametrize("nvml", [
    SimulatedNvml([], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED),
    SimulatedNvml([SimulatedGpu.from_model("T4", 0)], missing_functions={"nvmlEventSetCreate"}),
], ids=["no driver", "old driver"])
def test_no_events_when_nvml_cannot_give_them(nvml):
    watcher = XidEventWatcher(NvmlAdapter(nvml))
    assert watcher.open() == 0
    assert watcher.wait(10) == []


def test_simulator_times_out_with_the_real_error_class(sim_nvml):
    sim_nvml.nvmlInit()
    event_set = sim_nvml.nvmlEventSetCreate()
    with pytest.raises(pynvml.NVMLError_Timeout):
        sim_nvml.nvmlEventSetWait_v2(event_set, 1)
    sim_nvml.nvmlEventSetFree(event_set)


def test_close_frees_the_event_set(sim_nvml):
    watcher = XidEventWatcher(NvmlAdapter(sim_nvml))
    watcher.open()
    event_set = watcher._set
    watcher.close()
    assert event_set.freed and watcher.watching == 0


def test_daemon_without_a_kernel_log_reports_nvml_xids_at_once(control_plane, tmp_path, sim_nvml):
    enroll(ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=credential_path(tmp_path))
    daemon = Daemon(_config(tmp_path, interval_s="60", kernel_log="off"), nvml_module=sim_nvml)
    assert daemon.nvml_events  # auto: no kernel log to read
    with running(daemon):
        assert _wait_for(lambda: control_plane.sequences()), "no first report"
        assert _wait_for(lambda: sim_nvml._registrations, timeout=5), "the watcher never registered"
        sim_nvml.emit_xid(sim_nvml.gpus[3], 79)
        # The interval is a minute: only the event thread can deliver this within seconds.
        assert _wait_for(lambda: any(r["events"] for r in control_plane.reports()), timeout=5)
    urgent = next(r for r in control_plane.reports() if r["events"])
    assert [(e["kind"], e["code"], e["gpu_uuid"]) for e in urgent["events"]] == [("xid", 79, sim_nvml.gpus[3].uuid)]


def test_nvml_events_stay_off_when_the_kernel_log_is_read(tmp_path, sim_nvml):
    kernel_log = tmp_path / "kern.log"
    kernel_log.write_text("")
    assert not Daemon(_config(tmp_path, kernel_log=str(kernel_log)), nvml_module=sim_nvml).nvml_events
    assert Daemon(_config(tmp_path, kernel_log=str(kernel_log), nvml_events="on"), nvml_module=sim_nvml).nvml_events
    assert not Daemon(_config(tmp_path, nvml_events="off"), nvml_module=sim_nvml).nvml_events
