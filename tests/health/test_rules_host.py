"""Host rules (rules/host.py) over stored node status: thresholds, subjects, clock-skew-proof OOM window, and
"cannot tell" for agents that do not report the fields."""

from datetime import timedelta

import pytest

from fleet.health.models import Finding, HealthCondition, Rule, RuleOverride
from fleet.health.services.evaluation import evaluate
from tests.factories import PoolFactory

from .factories import T0, healthy_node
from .harness import lifecycle, open_findings, set_status

pytestmark = pytest.mark.django_db

GIB = 2**30
HEALTHY = {
    "cpu_busy_pct": 35.0, "mem_total_bytes": 1024 * GIB, "mem_available_bytes": 600 * GIB,
    "pressure": {"memory": {"some_avg10": 0.0, "full_avg10": 0.0}},
    "swap_total_bytes": 8 * GIB, "swap_free_bytes": 8 * GIB, "swap_in_pages_per_s": 0.0,
    "swap_out_pages_per_s": 0.0, "oom_kills": 0, "oom_kill_last_at": None,
    "volumes": [
        {"mount": "/", "fs_type": "ext4", "source": "/dev/nvme0n1p2", "network": False, "read_only": False,
         "hung": False, "stalled_s": None, "size_bytes": 2 * 10**12, "used_pct": 31.0, "inodes_used_pct": 2.0},
        {"mount": "/boot/efi", "fs_type": "vfat", "source": "/dev/nvme0n1p1", "network": False,
         "read_only": False, "hung": False, "stalled_s": None, "size_bytes": 2**29, "used_pct": 99.0,
         "inodes_used_pct": 1.0},
        {"mount": "/mnt/ckpt", "fs_type": "nfs4", "source": "10.0.0.20:/export", "network": True,
         "read_only": False, "hung": False, "stalled_s": None, "size_bytes": 10**14, "used_pct": 40.0,
         "inodes_used_pct": 1.0},
    ],
    "gpu_d_state": [],
    "peermem": {"module": "nvidia_peermem", "rdma_devices": 8, "nvidia_loaded": True},
    "clock": {"synced": True, "maxerror_us": 4000, "offset_s": 0.00001},
}


def _system(**changes) -> dict:
    return {**HEALTHY, **changes}


def _volume(mount: str, **changes) -> list[dict]:
    return [{**v, **changes} if v["mount"] == mount else v for v in HEALTHY["volumes"]]


def test_a_healthy_host_opens_nothing():
    node = healthy_node()
    set_status(node, system=_system())
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(hours=1))
    assert not Finding.objects.filter(node=node, rule__slug__in=[
        "host_memory_exhausted", "host_oom_kill", "swap_storm", "volume_full", "volume_read_only", "volume_hung",
        "clock_unsynced", "peermem_missing", "gpu_d_state"]).exists()


def test_host_memory_exhausted_by_available_memory_or_by_stall():
    node = healthy_node()
    # Ingestion stores MemTotal / MemAvailable as columns too (the rule reads those).
    result = lifecycle("host_memory_exhausted", node,
                       fault=lambda at: set_status(node, mem_total_bytes=1024 * GIB, mem_available_bytes=10 * GIB,
                                                   system=_system(mem_available_bytes=10 * GIB)),
                       clear=lambda at: set_status(node, mem_available_bytes=600 * GIB, system=_system()))
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party, finding.severity) == (
        "capacity", "application", "us", "critical")
    assert finding.summary.startswith("Host memory exhausted: 10.0 GiB available of 1024 GiB (1.0 %")
    other = healthy_node()
    set_status(other, system=_system(pressure={"memory": {"some_avg10": 80.0, "full_avg10": 42.0}}))
    evaluate(now=T0 + timedelta(hours=1))
    evaluate(now=T0 + timedelta(hours=1, minutes=5))
    assert "PSI memory full" in open_findings("host_memory_exhausted", other).get().summary


def test_oom_kill_window_is_measured_without_trusting_the_node_clock():
    node = healthy_node()
    # The node's clock runs two hours behind: its OOM stamp is 5 minutes before its own collection time.
    skewed = T0 - timedelta(hours=2)
    set_status(node, collected_at=skewed, received_at=T0,
               system=_system(oom_kills=1, oom_kill_last_at=(skewed - timedelta(minutes=5)).isoformat()))
    evaluate(now=T0)
    finding = open_findings("host_oom_kill", node).get()
    assert finding.summary.startswith("The kernel's OOM killer killed processes 5 min ago")
    assert finding.evidence["values"]["age_s"] == 300
    # 26 minutes later (the node stopped reporting new kills): still inside the 30-minute window, then out of it
    evaluate(now=T0 + timedelta(minutes=20))
    assert open_findings("host_oom_kill", node).exists()
    evaluate(now=T0 + timedelta(minutes=26))
    assert not open_findings("host_oom_kill", node).exists()


def test_swap_storm_threshold():
    node = healthy_node()
    set_status(node, system=_system(swap_in_pages_per_s=2000.0, swap_out_pages_per_s=2500.0))
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(minutes=5))
    assert not open_findings("swap_storm", node).exists(), "4,500 pages/s is under the 5,000 default"
    result = lifecycle("swap_storm", node, start=T0 + timedelta(minutes=10),
                       fault=lambda at: set_status(node, system=_system(swap_in_pages_per_s=9000.0,
                                                                       swap_out_pages_per_s=12000.0,
                                                                       swap_free_bytes=GIB)),
                       clear=lambda at: set_status(node, system=_system()))
    assert (result.opened.layer, result.opened.responsible_party) == ("host_os", "us")
    assert "swap 88 % used" in result.opened.summary


def test_volume_full_per_volume_subject_and_ignored_boot_partition():
    node = healthy_node()
    set_status(node, system=_system(volumes=_volume("/", used_pct=99.2)))
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(minutes=2))
    finding = open_findings("volume_full", node).get()  # /boot/efi at 99 % is ignored by default
    assert finding.subject == "volume:/"
    assert finding.summary.startswith("Volume / (ext4) is full: 99.2 % of its space used")


def test_volume_full_by_inodes_with_a_pool_threshold():
    pool = PoolFactory()
    node = healthy_node(pool=pool)
    RuleOverride.objects.create(rule=Rule.objects.get(slug="volume_full"), pool=pool, params={"used_pct": 90})
    set_status(node, system=_system(volumes=_volume("/mnt/ckpt", inodes_used_pct=93.0)))
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(minutes=2))
    assert "93.0 % of its inodes used" in open_findings("volume_full", node).get().summary


def test_read_only_and_hung_volumes():
    node = healthy_node()
    set_status(node, system=_system(volumes=_volume("/", read_only=True)))
    evaluate(now=T0)
    assert open_findings("volume_read_only", node).get().subject == "volume:/"
    set_status(node, system=_system(volumes=_volume("/mnt/ckpt", hung=True, stalled_s=45.0)))
    evaluate(now=T0 + timedelta(minutes=1))
    hung = open_findings("volume_hung", node).get()
    assert hung.summary.startswith("The network volume /mnt/ckpt (nfs4, 10.0.0.20:/export) does not answer: a "
                                   "statvfs has been waiting 45 s")


def test_a_long_mount_point_gets_a_bounded_subject():
    node = healthy_node()
    mount = "/mnt/" + "very-long-directory-name/" * 8
    volumes = [*HEALTHY["volumes"], {**HEALTHY["volumes"][0], "mount": mount, "read_only": True}]
    set_status(node, system=_system(volumes=volumes))
    evaluate(now=T0)
    finding = open_findings("volume_read_only", node).get()
    assert len(finding.subject) <= 64 and finding.subject.startswith("volume:/mnt/very-long")


def test_clock_unsynced_and_its_party_on_shared_cloud():
    node = healthy_node()
    result = lifecycle("clock_unsynced", node,
                       fault=lambda at: set_status(node, system=_system(
                           clock={"synced": False, "maxerror_us": 16_000_000, "offset_s": 0.0})),
                       clear=lambda at: set_status(node, system=_system()))
    assert (result.opened.step, result.opened.layer) == ("software_chain", "host_os")
    assert "STA_UNSYNC" in result.opened.summary and "16000 ms" in result.opened.summary


def test_peermem_expected_only_with_rdma_devices():
    node = healthy_node()
    set_status(node, system=_system(peermem={"module": None, "rdma_devices": 0, "nvidia_loaded": True}))
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(minutes=10))
    assert not open_findings("peermem_missing", node).exists(), "no RDMA NIC, no GPUDirect RDMA expected"
    result = lifecycle("peermem_missing", node, start=T0 + timedelta(minutes=20),
                       fault=lambda at: set_status(node, system=_system(
                           peermem={"module": None, "rdma_devices": 4, "nvidia_loaded": True})),
                       clear=lambda at: set_status(node, system=_system()))
    assert (result.opened.step, result.opened.layer) == ("software_chain", "gpu_driver")


def test_d_state_processes_in_the_driver():
    node = healthy_node()
    stuck = [{"pid": 52002, "name": "python", "devices": ["/dev/nvidia-uvm", "/dev/nvidia2", "/dev/nvidiactl"]}]
    result = lifecycle("gpu_d_state", node,
                       fault=lambda at: set_status(node, system=_system(gpu_d_state=stuck)),
                       clear=lambda at: set_status(node, system=_system()))
    assert (result.opened.step, result.opened.layer, result.opened.severity) == (
        "platform_hardware", "gpu_driver", "critical")
    assert result.opened.summary.startswith("1 process(es) stuck in uninterruptible sleep holding /dev/nvidia2: "
                                            "python (pid 52002)")


def test_an_agent_that_does_not_report_host_checks_opens_nothing():
    node = healthy_node()
    set_status(node, system={"cpu_busy_pct": 20.0, "mem_total_bytes": None, "mem_available_bytes": None,
                             "pressure": None})
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(hours=1))
    assert not HealthCondition.objects.filter(node=node, rule__slug__in=[
        "host_oom_kill", "volume_full", "clock_unsynced", "peermem_missing", "gpu_d_state"]).exists()
