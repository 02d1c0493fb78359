"""The simulator: scenario validation, every fault's observable effect, the step API, a fleet run."""

from __future__ import annotations

import threading

import pytest

from fleet_agent.simulator import ScenarioError, SimulatedAgent, load_scenario, parse_scenario, run_fleet


def _after_fault(name: str, tmp_path, t: float = 45.0) -> tuple[SimulatedAgent, dict]:
    agent = SimulatedAgent.from_scenario(load_scenario(name), 0, work_dir=tmp_path)
    agent.step(0)
    agent.step(15)
    return agent, agent.step(t)


def _kinds(report: dict) -> list[tuple[str, int | None]]:
    return [(e["kind"], e["code"]) for e in report["events"]]


def test_xid_lands_in_the_kernel_log_and_comes_back_attributed(tmp_path):
    agent, report = _after_fault("xid", tmp_path)
    assert _kinds(report) == [("xid", 79)]
    event = report["events"][0]
    assert event["gpu_uuid"] == agent.nvml.gpus[3].uuid and event["pci_bus_id"] == agent.nvml.gpus[3].bus_id
    assert "NVRM: Xid (PCI:0000:48:00): 79" in event["raw"]
    assert _kinds(agent.step(75)) == [("xid", 13)]
    assert agent.step(90)["events"] == []


def test_gpu_lost(tmp_path):
    agent, report = _after_fault("gpu_lost", tmp_path)
    assert report["gpus"][5]["lost"] is True and report["visibility"]["lost_gpus"] == [
        agent.nvml.gpus[5].bus_id
    ]
    assert sorted(_kinds(report)) == [("gpu_lost", None), ("xid", 79)]


def test_gpu_missing(tmp_path):
    _, report = _after_fault("gpu_missing", tmp_path)
    assert report["visibility"]["gpu_count"] == 7 and report["visibility"]["expected_gpu_count"] == 8


def test_ecc_uncorrectable(tmp_path):
    _, report = _after_fault("ecc_uncorrectable", tmp_path)
    assert (
        report["gpus"][2]["ecc"]["volatile_uncorrected"] == 1
        and report["gpus"][2]["ecc"]["aggregate_uncorrected"] == 1
    )
    assert _kinds(report) == [("xid", 48)]


def test_row_remap_pending_then_cleared_by_a_reset(tmp_path):
    agent, report = _after_fault("row_remap_pending", tmp_path)
    assert report["gpus"][4]["remapped_rows"] == {
        "correctable": 0,
        "uncorrectable": 1,
        "pending": True,
        "failure": False,
    }
    assert _kinds(report) == [("xid", 63)]
    assert agent.step(301)["gpus"][4]["remapped_rows"]["pending"] is False


def test_row_remap_failure(tmp_path):
    _, report = _after_fault("row_remap_failure", tmp_path)
    assert report["gpus"][6]["remapped_rows"]["failure"] is True and _kinds(report) == [("xid", 64)]


def test_pcie_downgrade(tmp_path):
    _, report = _after_fault("pcie_downgrade", tmp_path)
    assert report["gpus"][0]["pcie"] == {"gen_current": 3, "gen_max": 5, "width_current": 8, "width_max": 16}
    assert report["gpus"][1]["pcie"]["gen_current"] == 5


def test_thermal_throttle(tmp_path):
    _, report = _after_fault("thermal_throttle", tmp_path)
    hot = report["gpus"][7]
    assert hot["temperature_c"] == 91 and "HwThermalSlowdown" in hot["clock_event_reasons"]
    assert hot["sm_clock_mhz"] < report["gpus"][0]["sm_clock_mhz"]


def test_power_throttle(tmp_path):
    _, report = _after_fault("power_throttle", tmp_path)
    for gpu in report["gpus"]:
        assert {"SwPowerCap", "HwPowerBrakeSlowdown"} <= set(gpu["clock_event_reasons"])
        assert gpu["power_draw_w"] == gpu["power_limit_w"]


def test_memory_pressure(tmp_path):
    _, report = _after_fault("memory_pressure", tmp_path)
    assert all(g["memory_used_bytes"] / g["memory_total_bytes"] > 0.96 for g in report["gpus"])


def test_residual_process(tmp_path):
    _, report = _after_fault("residual_process", tmp_path)
    gpu = report["gpus"][2]
    assert gpu["utilization_gpu_pct"] == 0
    assert gpu["processes"] == [{"pid": 4242, "used_memory_bytes": 20 * 2**30, "name": "python"}]


def test_cpu_bound_pipeline(tmp_path):
    _, report = _after_fault("cpu_bound_pipeline", tmp_path)
    assert sum(g["utilization_gpu_pct"] for g in report["gpus"]) / 8 < 30
    assert report["system"]["cpu_busy_pct"] > 90


def test_cpu_steal(tmp_path):
    _, report = _after_fault("cpu_steal", tmp_path)
    assert report["system"]["cpu_steal_pct"] > 20 and report["cloud"]["provider"] == "aws"
    assert report["gpus"][0]["power_draw_w"] is None  # a vGPU guest cannot read power


def test_driver_upgraded_changes_the_inventory(tmp_path):
    agent = SimulatedAgent.from_scenario(load_scenario("driver_upgraded"), 0, work_dir=tmp_path)
    first = agent.step(0)
    agent.acknowledge(first["sequence"])
    assert agent.step(15)["inventory"] is None
    report = agent.step(45)
    assert report["inventory"]["stack"]["driver_version"] == "560.35.03"
    assert report["inventory"]["stack"]["cuda_driver_version"] == "12.6"


def test_framework_built_for_a_newer_cuda(tmp_path):
    _, report = _after_fault("framework_cuda_too_new", tmp_path)
    stack = report["inventory"]["stack"]
    assert stack["frameworks"][0]["cuda"] == "12.8" and stack["cuda_driver_version"] == "12.4"


def test_arch_missing(tmp_path):
    _, report = _after_fault("arch_missing", tmp_path)
    arches = report["inventory"]["stack"]["frameworks"][0]["arch_list"]
    assert "sm_90" not in arches and "sm_80" in arches and report["gpus"][0]["compute_capability"] == "9.0"


@pytest.mark.parametrize(
    ("cloud", "kind", "source", "detail_key", "lead_s"),
    [
        ("aws", "terminate", "aws.spot.instance-action", "action", 120),
        ("gcp", "preempt", "gcp.preempted", "preempted", 30),
        ("azure", "preempt", "azure.scheduledevents", "EventType", 30),
        ("alibaba", "terminate", "alibaba.spot.termination-time", "termination-time", 300),
        ("tencent", "terminate", "tencent.spot.termination-time", "termination-time", 120),
    ],
)
def test_spot_notice_per_cloud_then_reclaim(tmp_path, cloud, kind, source, detail_key, lead_s):
    agent, report = _after_fault(f"spot_notice_{cloud}", tmp_path)
    notice = report["cloud"]["notice"]
    assert (notice["kind"], notice["source"]) == (kind, source) and detail_key in notice["detail"]
    assert report["cloud"]["provider"] == cloud and report["cloud"]["spot"] is True
    assert [e["kind"] for e in report["events"]] == ["preemption_notice"]
    assert notice["deadline"] is not None
    assert agent.step(30 + lead_s - 1) is not None  # still running until the deadline
    assert agent.step(30 + lead_s + 1) is None  # reclaimed: the node goes silent for good
    assert agent.step(30 + lead_s + 600) is None


def test_checkpoint_stale(tmp_path):
    _, healthy = _after_fault("healthy", tmp_path / "h")
    _, stale = _after_fault("checkpoint_stale", tmp_path / "s")
    assert healthy["checkpoint"]["newest_age_s"] < 600
    assert stale["checkpoint"]["newest_age_s"] >= 7200


def test_silent_agent_stops_and_resumes(tmp_path):
    agent, report = _after_fault("silent", tmp_path)
    assert report is None
    assert agent.step(100) is None
    back = agent.step(181)
    assert back is not None and back["sequence"] == 3  # nothing was numbered while silent


def test_no_driver(tmp_path):
    _, report = _after_fault("no_driver", tmp_path)
    assert report["visibility"]["nvml"] == "library_not_found" and report["gpus"] == []


def test_time_only_moves_forward(tmp_path):
    agent = SimulatedAgent.from_scenario(load_scenario("healthy"), 0, work_dir=tmp_path)
    agent.step(30)
    with pytest.raises(ValueError, match="only moves forward"):
        agent.step(10)


def test_short_lived_fault_between_two_steps_still_fires(tmp_path):
    scenario = parse_scenario(
        {
            "nodes": [
                {
                    "provider": "own",
                    "gpu": {"model": "L4", "count": 1},
                    "faults": [{"at_s": 5, "clear_at_s": 6, "fault": "xid", "gpu": 0, "code": 31}],
                }
            ]
        }
    )
    agent = SimulatedAgent.from_scenario(scenario, 0, work_dir=tmp_path)
    agent.step(0)
    assert _kinds(agent.step(15)) == [("xid", 31)]
    assert agent.active_faults() == []


def test_nodes_beyond_the_scenario_repeat_its_list_with_distinct_identities(tmp_path):
    scenario = load_scenario("demo-fleet")
    assert len(scenario.nodes) == 24
    providers = {node.provider for node in scenario.nodes}
    assert providers == {"aws", "gcp", "azure", "alibaba", "idc", "own"}
    agents = [SimulatedAgent.from_scenario(scenario, i, work_dir=tmp_path) for i in (0, 24)]
    assert agents[0].spec == agents[1].spec
    assert agents[0].machine_id != agents[1].machine_id and agents[0].hostname != agents[1].hostname


@pytest.mark.parametrize(
    ("document", "where"),
    [
        ({"nodes": []}, "scenario.nodes"),
        ({"nodes": [{"provider": "ibm"}]}, "nodes[0].provider"),
        (
            {
                "nodes": [
                    {
                        "provider": "own",
                        "gpu": {"model": "H100-SXM-80GB", "count": 2},
                        "faults": [{"at_s": 1, "fault": "gpu_lost", "gpu": 5}],
                    }
                ]
            },
            "nodes[0].faults[0].gpu",
        ),
        (
            {"nodes": [{"provider": "own", "faults": [{"at_s": 1, "fault": "spot_notice"}]}]},
            "faults[0].fault",
        ),
        ({"nodes": [{"provider": "aws", "faults": [{"at_s": 1, "fault": "meteor"}]}]}, "faults[0].fault"),
        (
            {"nodes": [{"provider": "aws", "faults": [{"at_s": 9, "clear_at_s": 3, "fault": "silent"}]}]},
            "faults[0].clear_at_s",
        ),
        (
            {"nodes": [{"provider": "aws", "faults": [{"at_s": 1, "fault": "silent", "gpu_": 1}]}]},
            "faults[0]",
        ),
        ({"nodes": [{"provider": "aws", "gpus": 8}]}, "nodes[0]"),
        (
            {
                "nodes": [
                    {"provider": "gcp", "faults": [{"at_s": 1, "fault": "spot_notice", "kind": "hibernate"}]}
                ]
            },
            "faults[0].kind",
        ),
    ],
)
def test_scenario_errors_name_the_place(document, where):
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(document)
    assert where in str(raised.value)


def test_unknown_scenario_name_lists_the_bundled_ones():
    with pytest.raises(ScenarioError, match="demo-fleet"):
        load_scenario("no-such-scenario")


def test_fleet_run_sends_urgent_reports_without_waiting_for_the_interval(control_plane, tmp_path):
    scenario = parse_scenario(
        {
            "name": "urgent",
            "interval_s": 60,
            "nodes": [
                {
                    "provider": "own",
                    "gpu": {"model": "L4", "count": 2},
                    "faults": [{"at_s": 1.0, "fault": "xid", "gpu": 1, "code": 79}],
                }
            ],
        }
    )
    result = run_fleet(
        scenario,
        nodes=2,
        server=control_plane.url,
        token="fe_test",
        duration_s=2.0,
        state_dir=tmp_path,
        workers=2,
    )
    assert result.enrolled == 2 and result.pending == 0 and result.urgent_reports == 2
    xids = [r for r in control_plane.reports() if any(e["kind"] == "xid" for e in r["events"])]
    assert len(xids) == 2 and {r["node"]["node_id"] for r in xids} == {1, 2}


def test_fleet_of_many_nodes_and_a_restart_reuses_enrolments(control_plane, tmp_path):
    first = run_fleet(
        load_scenario("demo-fleet"),
        nodes=12,
        server=control_plane.url,
        token="fe_test",
        interval_s=1.0,
        state_dir=tmp_path,
        workers=4,
        duration_s=1.5,
    )
    assert first.enrolled == 12 and first.reports_acked >= 12 and first.pending == 0
    assert len(control_plane.enrollments) == 12
    stop = threading.Event()
    stop.set()  # e.g. SIGTERM right away: still enrols (reusing credentials) and shuts down cleanly
    again = run_fleet(
        load_scenario("demo-fleet"),
        nodes=12,
        server=control_plane.url,
        token="fe_test",
        interval_s=1.0,
        state_dir=tmp_path,
        stop_event=stop,
    )
    assert again.enrolled == 12 and len(control_plane.enrollments) == 12  # credentials reused
    by_instance = {}
    for report in control_plane.reports():
        by_instance.setdefault(report["agent"]["instance_id"], []).append(report["sequence"])
    assert len(by_instance) == 12
    assert all(seqs == list(range(1, len(seqs) + 1)) for seqs in by_instance.values())


def test_enrolment_failures_are_reported(control_plane, tmp_path):
    result = run_fleet(
        load_scenario("healthy"),
        nodes=2,
        server=control_plane.url,
        token="fe_wrong",
        duration_s=0.2,
        state_dir=tmp_path,
    )
    assert result.enrolled == 0 and len(result.errors) == 2 and "403" in result.errors[0]
