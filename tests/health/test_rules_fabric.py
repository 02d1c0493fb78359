"""The fabric rules on hand-written reports: each goes through ingestion's digest (`fabric_digest`) into the node
status and is judged by a real evaluation cycle, with the hysteresis, routing and evidence of every rule."""

import pytest

from fleet.health.models import Finding
from fleet.health.services.evaluation import evaluate
from fleet.telemetry.services.fabric import fabric_digest
from tests.factories import BaselineFactory

from .factories import T0, bus_id, healthy_node
from .harness import lifecycle, open_findings, set_status

pytestmark = pytest.mark.django_db

H100 = "NVIDIA H100 80GB HBM3"


def _gpu(index: int, **overrides) -> dict:
    gpu = {"index": index, "uuid": f"GPU-{index}", "name": H100, "pci_bus_id": bus_id(index), "lost": False,
           "nvlink": [1] * 18, "persistence_mode": True, "ecc_mode": {"current": True, "pending": True},
           "mig_mode": {"current": False, "pending": False}, "gsp_firmware_version": "550.54.15",
           "nvlink_errors": [], "fabric": {"state": "completed", "status": 0, "clique_id": 0,
                                           "cluster_uuid": "ab" * 16, "health_mask": 0}}
    gpu.update(overrides)
    return gpu


def _port(n: int, **overrides) -> dict:
    port = {"device": f"mlx5_{n}", "port": 1, "link_layer": "InfiniBand", "state": "ACTIVE", "phys_state": "LinkUp",
            "rate": "400 Gb/sec (4X NDR)", "rate_gbps": 400.0, "was_active": True,
            "counters": {"symbol_error": 0, "link_downed": 0, "link_error_recovery": 0, "port_rcv_errors": 0},
            "recent": {"symbol_error": 0, "link_downed": 0, "link_error_recovery": 0, "port_rcv_errors": 0}}
    port.update(overrides)
    return port


def _report(gpus: int = 8, *, pci_gpus: int | None = None, ports: int = 8) -> dict:
    on_bus = gpus if pci_gpus is None else pci_gpus
    return {
        "gpus": [_gpu(i) for i in range(gpus)],
        "fabric": {
            "pci": {"gpus": [{"bus_id": bus_id(i)[4:], "device_id": "0x2330", "driver": "nvidia"}
                             for i in range(on_bus)], "nvswitches": 4},
            "fabric_manager": {"installed": True, "running": True},
            "imex": {"configured": False, "running": False, "channels": 0},
            "infiniband": [_port(n) for n in range(ports)],
            "window_s": 900,
        },
    }


def _store(node, report: dict) -> None:
    set_status(node, fabric=fabric_digest(report))


def _apply(node, change) -> callable:
    def apply(at):
        report = _report()
        change(report)
        _store(node, report)
    return apply


def _healthy(**kwargs):
    node = healthy_node(**kwargs)
    _store(node, _report())
    return node


def test_healthy_hgx_node_passes_every_fabric_rule():
    node = _healthy(delivery_form="bare_metal_owned")
    evaluate(now=T0)
    assert not Finding.objects.filter(node=node).exists()


def test_digests_of_healthy_nodes_are_identical_so_the_cycle_decodes_one():
    first, second = _report(), _report()
    second["gpus"][0]["uuid"] = "GPU-other"
    second["fabric"]["infiniband"][0]["counters"]["symbol_error"] = 12345  # old, not growing
    assert fabric_digest(first) == fabric_digest(second)
    assert fabric_digest(first)["attention"] == []


def test_report_of_an_older_agent_is_unknown_not_passed():
    node = healthy_node()
    set_status(node, fabric=fabric_digest({"gpus": [{"index": 0, "uuid": "GPU-0", "pci_bus_id": bus_id(0)}]}))
    evaluate(now=T0)
    for slug in ("gpu_missing_from_nvml", "fabric_manager_down", "persistence_mode_off", "ib_port_down"):
        assert not open_findings(slug, node).exists()


def test_gpu_on_the_bus_but_not_in_nvml_is_the_drivers_and_gpu_count_low_stays_quiet():
    node = _healthy(delivery_form="bare_metal_owned")

    def fault(at):
        report = _report()
        del report["gpus"][5]
        report["fabric"]["pci"]["gpus"][5]["driver"] = None
        _store(node, report)
        set_status(node, gpu_count_seen=7)

    def clear(at):
        _store(node, _report())
        set_status(node, gpu_count_seen=8)

    result = lifecycle("gpu_missing_from_nvml", node, fault=fault, clear=clear)
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("visibility", "gpu_driver", "us")
    assert finding.summary == (f"GPU at {bus_id(5)[4:]} is on the PCI bus but NVML does not see it: no driver is "
                               "bound to it (the nvidia driver failed to probe it)")
    assert not Finding.objects.filter(node=node, rule__slug="gpu_count_low").exists()


def test_gpu_gone_from_the_bus_is_gpu_count_low_with_the_bus_count():
    node = _healthy(delivery_form="bare_metal_owned")
    report = _report(7)
    _store(node, report)
    set_status(node, gpu_count_seen=7)
    evaluate(now=T0)
    evaluate(now=T0.replace(minute=5))
    finding = open_findings("gpu_count_low", node).get()
    assert finding.summary == "7 of 8 GPUs visible; 7 on the PCI bus — the missing GPU(s) are gone from the bus"
    assert not open_findings("gpu_missing_from_nvml", node).exists()


def test_gpu_passed_through_to_a_vm_is_not_missing_from_nvml():
    node = _healthy()
    report = _report()
    report["fabric"]["pci"]["gpus"].append({"bus_id": "0000:f0:00.0", "device_id": "0x2330", "driver": "vfio-pci"})
    _store(node, report)
    evaluate(now=T0)
    evaluate(now=T0.replace(minute=5))
    assert not open_findings("gpu_missing_from_nvml", node).exists()


def test_fabric_manager_not_running_on_an_a100_board_without_fabric_info():
    node = _healthy(delivery_form="bare_metal_owned")

    def down(report):
        report["fabric"]["fabric_manager"]["running"] = False
        for gpu in report["gpus"]:
            gpu["fabric"] = None  # A100: NVML has no fabric info; the NVSwitches on the bus say it is HGX

    result = lifecycle("fabric_manager_down", node, fault=_apply(node, down), clear=_apply(node, lambda r: None))
    assert "4 NVSwitch(es)" in result.opened.summary and "not running" in result.opened.summary
    assert result.opened.layer == "gpu_driver"


def test_fabric_registration_failure_alone_is_a_fabric_manager_finding():
    node = _healthy()

    def unregistered(report):
        report["gpus"][2]["fabric"] = {"state": "completed", "status": 3, "clique_id": 0, "cluster_uuid": None,
                                       "health_mask": 0}

    result = lifecycle("fabric_manager_down", node, fault=_apply(node, unregistered),
                       clear=_apply(node, lambda r: None))
    assert "GPU(s) 2 not registered" in result.opened.summary


def test_a_pcie_node_without_nvswitches_needs_no_fabric_manager():
    node = _healthy()
    report = _report()
    report["fabric"]["pci"]["nvswitches"] = 0
    report["fabric"]["fabric_manager"] = {"installed": False, "running": False}
    for gpu in report["gpus"]:
        gpu["fabric"] = None
    _store(node, report)
    evaluate(now=T0)
    evaluate(now=T0.replace(minute=5))
    assert not open_findings("fabric_manager_down", node).exists()


def test_imex_configured_but_stopped():
    node = _healthy()

    def configured(running):
        def change(report):
            report["fabric"]["imex"] = {"configured": True, "running": running, "channels": 1}
        return change

    result = lifecycle("imex_down", node, fault=_apply(node, configured(False)), clear=_apply(node, configured(True)))
    assert "nvidia-imex" in result.opened.summary


def test_persistence_off_on_a_consumer_board_is_not_judged():
    node = _healthy()
    report = _report()
    for gpu in report["gpus"]:
        gpu.update(name="NVIDIA GeForce RTX 4090", persistence_mode=False)
    _store(node, report)
    evaluate(now=T0)
    evaluate(now=T0.replace(hour=13))
    assert not open_findings("persistence_mode_off", node).exists()


def test_persistence_off_on_data_center_gpus():
    node = _healthy(delivery_form="cloud_dedicated")

    def off(report):
        for gpu in report["gpus"][:2]:
            gpu["persistence_mode"] = False

    result = lifecycle("persistence_mode_off", node, fault=_apply(node, off), clear=_apply(node, lambda r: None))
    assert result.opened.summary.startswith("Persistence mode is off on data-center GPU(s) 0, 1")
    assert (result.opened.layer, result.opened.responsible_party) == ("gpu_driver", "us")


def test_ecc_pending_change_names_the_direction():
    node = _healthy()

    def pending(report):
        report["gpus"][3]["ecc_mode"] = {"current": True, "pending": False}

    result = lifecycle("ecc_mode", node, fault=_apply(node, pending), clear=_apply(node, lambda r: None))
    assert "ECC mode change (disable) is pending on GPU(s) 3" in result.opened.summary


def test_mig_pinned_disabled_but_enabled():
    node = _healthy()
    BaselineFactory(node=node, mig_mode="disabled")

    def enabled(report):
        report["gpus"][0]["mig_mode"] = {"current": True, "pending": True}

    result = lifecycle("mig_mode", node, fault=_apply(node, enabled), clear=_apply(node, lambda r: None))
    assert "MIG is enabled on GPU(s) 0 but the baseline pins it disabled" in result.opened.summary


def test_mig_enabled_without_a_pin_is_not_a_finding():
    node = _healthy()
    report = _report()
    for gpu in report["gpus"]:
        gpu["mig_mode"] = {"current": True, "pending": True}
    _store(node, report)
    evaluate(now=T0)
    evaluate(now=T0.replace(minute=5))
    assert not open_findings("mig_mode", node).exists()


def test_gsp_firmware_against_the_baseline_pin():
    node = _healthy()
    BaselineFactory(node=node, gsp_firmware_version="560.35.03")
    evaluate(now=T0)
    evaluate(now=T0.replace(minute=5))
    finding = open_findings("gsp_firmware_drift", node).get()
    assert finding.summary == "GSP firmware differs from the baseline 560.35.03: 550.54.15 on GPU(s) 0, 1, 2, 3, 4, " \
                              "5, 6, 7"


def test_nvlink_down_names_the_gpu_and_link():
    node = _healthy(delivery_form="bare_metal_owned")

    def down(report):
        report["gpus"][6]["nvlink"][11] = 0

    result = lifecycle("nvlink_down", node, fault=_apply(node, down), clear=_apply(node, lambda r: None))
    finding = result.opened
    assert finding.gpu is not None and finding.gpu.index == 6
    assert finding.summary.startswith("GPU 6: NVLink link(s) 11 inactive")
    assert (finding.layer, finding.responsible_party) == ("hardware", "hardware_vendor")


def test_nvlink_counters_judged_by_growth_and_recovery_is_critical():
    node = _healthy()

    def errors(recovery):
        def change(report):
            report["gpus"][1]["nvlink_errors"] = [{"link": 4, "replay": 7, "recovery": recovery, "crc_flit": 5000,
                                                  "crc_data": 0, "recent": {"replay": 0, "recovery": recovery,
                                                                            "crc_flit": 150, "crc_data": 0}}]
        return change

    result = lifecycle("nvlink_errors", node, fault=_apply(node, errors(0)), clear=_apply(node, lambda r: None))
    assert result.opened.summary == "GPU 1: NVLink errors in the last 15 min (link 4: 150 CRC)"
    assert result.opened.severity == "warning"

    old = _report()
    old["gpus"][1]["nvlink_errors"] = [{"link": 4, "replay": 0, "recovery": 0, "crc_flit": 9000, "crc_data": 0,
                                        "recent": {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0}}]
    _store(node, old)  # a large count that stopped growing is history, not a fault
    evaluate(now=T0.replace(hour=14))
    assert not open_findings("nvlink_errors", node).exists()

    report = _report()
    errors(2)(report)
    _store(node, report)
    evaluate(now=T0.replace(hour=15))
    assert open_findings("nvlink_errors", node).get().severity == "critical"


def test_ib_port_that_was_up_goes_down():
    node = _healthy(delivery_form="bare_metal_hosted")

    def down(report):
        report["fabric"]["infiniband"][3].update(state="DOWN", phys_state="Polling")

    result = lifecycle("ib_port_down", node, fault=_apply(node, down), clear=_apply(node, lambda r: None))
    finding = result.opened
    assert finding.subject == "ib:mlx5_3/1"
    assert (finding.step, finding.layer, finding.responsible_party) == ("platform_hardware", "hardware", "provider")


def test_ib_port_never_up_is_unused_unless_the_baseline_counts_it():
    node = _healthy()
    report = _report()
    report["fabric"]["infiniband"].append(_port(8, state="DOWN", phys_state="Polling", was_active=False))
    _store(node, report)
    evaluate(now=T0)
    evaluate(now=T0.replace(minute=5))
    assert not open_findings("ib_port_down", node).exists()

    BaselineFactory(node=node, ib_port_count=9)
    evaluate(now=T0.replace(minute=10))
    evaluate(now=T0.replace(minute=15))
    assert "8 of 9 expected ports active" in open_findings("ib_port_down", node).get().summary


def test_ib_port_trained_down_against_its_peers_and_against_the_pin():
    node = _healthy()

    def slow(report):
        report["fabric"]["infiniband"][6].update(rate="200 Gb/sec (4X HDR)", rate_gbps=200.0)

    result = lifecycle("ib_port_degraded", node, fault=_apply(node, slow), clear=_apply(node, lambda r: None))
    assert "rate 200 Gb/s of 400 Gb/s" in result.opened.summary
    assert result.opened.evidence["values"]["rate_source"] == "fastest port"


def test_roce_port_symbol_errors_rising():
    node = _healthy()

    def erring(report):
        report["fabric"]["infiniband"][0].update(link_layer="Ethernet", rate="100 Gb/sec (4X EDR)", rate_gbps=100.0)
        report["fabric"]["infiniband"][0]["recent"]["symbol_error"] = 42

    result = lifecycle("ib_port_degraded", node, fault=_apply(node, erring), clear=_apply(node, lambda r: None))
    assert "42 symbol error" in result.opened.summary
