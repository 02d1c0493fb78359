"""Rule-evaluation benchmark: one full health cycle over 1,000 and 10,000 nodes (8 GPUs each) in PostgreSQL.

    .venv/bin/python bench/rules.py                 # 1,000 then 10,000 nodes, naive baseline, worker latency
    .venv/bin/python bench/rules.py --nodes 2000 --no-worker

Creates (or reuses) a scratch database (`fleet_bench_rules` on the local PostgreSQL unless --database-url),
migrates it, and fills it with a synthetic fleet through bulk_create: five pools (cloud dedicated on-demand
and spot, cloud shared, owned and hosted bare metal) with baselines, a software stack per node, the latest
node and GPU status, and a sprinkling of faults (2 % of nodes, every kind), recent Xid/SXid/preemption events and a
week of older Xid history. Every node carries the fabric digest its agent's report makes (`NodeStatus.fabric`: GPU
settings, NVLink, PCI view, fabric manager; on bare metal 8 InfiniBand ports), and another 2 % a fabric fault
(fabric manager stopped, NVLink errors, an InfiniBand port down). Then it times:

* the set-based cycle (`fleet.health.services.evaluation.evaluate`) on 1,000 nodes: the first cycle opens the
  findings, the second (15 s later) is the steady state that runs every 15 s;
* the baseline in the same run: the naive per-node evaluation of the same 1,000 nodes in the same state (one
  scoped cycle per node, i.e. the queries-per-node design), and the ratio between the two;
* the same set-based cycles on 10,000 nodes (80,000 GPUs), with the query count, which must not change, and the
  three slowest queries of the steady cycle;
* with a real Celery worker (unless --no-worker): an urgent event (Xid 79) committed, `evaluate_nodes.delay()`,
  and the time until the finding is visible in the database.
"""

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
H100 = "NVIDIA H100 80GB HBM3"
H100_MEMORY = 85520809984
FAULTY_SHARE = 0.02
POOLS = [  # name, provider slug, delivery form, billing mode, share of the fleet
    ("p5-ondemand", "aws", "cloud_dedicated", "on_demand", 0.40),
    ("p5-spot", "aws", "cloud_dedicated", "spot", 0.20),
    ("shared-h100", "aws", "cloud_shared", "on_demand", 0.10),
    ("hgx-owned", "colo", "bare_metal_owned", "reserved", 0.20),
    ("hgx-hosted", "idc", "bare_metal_hosted", "reserved", 0.10),
]
STACK = {"driver_version": "550.54.15", "cuda_driver_version": "12.4", "cuda_toolkits": ["12.4"],
         "python_version": "3.11.9",
         "frameworks": [{"name": "torch", "version": "2.4.0", "cuda": "12.4", "arch_list": ["sm_80", "sm_90"]}],
         "container_runtime": "containerd 1.7.13", "nvidia_container_toolkit": "1.15.0",
         "os": "Ubuntu 22.04.4 LTS", "kernel": "5.15.0-105-generic"}


def _django(database_url: str, var_dir: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.local"
    os.environ["DATABASE_URL"] = database_url
    os.environ["FLEET_VAR_DIR"] = var_dir
    os.environ["DEBUG"] = "false"  # no query log growing through 170,000 inserted rows
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()


def _ensure_database(database_url: str) -> None:
    import psycopg

    name = database_url.rsplit("/", 1)[1]
    admin = database_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def _reset() -> None:
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        # Everything hangs off providers (nodes, GPUs, status, events, findings); the rule catalog and the
        # Xid policy table stay as the migrations seeded them.
        cursor.execute("TRUNCATE inventory_provider, health_healthcondition, health_finding, health_ruleoverride "
                       "RESTART IDENTITY CASCADE")


class Fleet:
    """Synthetic fleet, built in slices so 1,000 nodes can be measured before growing to 10,000."""

    def __init__(self, seed: int = 7):
        from fleet.health.models import Rule, RuleOverride
        from fleet.inventory.models import Baseline, Pool, Provider

        self.random = random.Random(seed)
        self.providers = {
            "aws": Provider.objects.create(name="AWS", slug="aws", kind="cloud", cloud="aws"),
            "colo": Provider.objects.create(name="Own colo", slug="colo", kind="own"),
            "idc": Provider.objects.create(name="IDC Hosting", slug="idc", kind="idc"),
        }
        self.pools = []
        for name, provider, form, billing, share in POOLS:
            pool = Pool.objects.create(name=name, provider=self.providers[provider], delivery_form=form,
                                       billing_mode=billing, gpu_model=H100, gpus_per_node=8)
            Baseline.objects.create(name=f"{name} baseline", pool=pool, driver_version=STACK["driver_version"],
                                    cuda_driver_version=STACK["cuda_driver_version"], gpu_model=H100,
                                    frameworks=[{"name": "torch", "version": "2.4.0", "cuda": "12.4"}])
            self.pools.append((pool, share))
        spot = next(p for p, _ in self.pools if p.billing_mode == "spot")
        RuleOverride.objects.create(rule=Rule.objects.get(slug="checkpoint_stale"), pool=spot,
                                    params={"max_age_s": 900})
        self.count = 0
        self.faulty = 0

    def _pool_for(self, i: int):
        point = (i * 0.6180339887) % 1.0  # evenly spread, deterministic
        acc = 0.0
        for pool, share in self.pools:
            acc += share
            if point < acc:
                return pool
        return self.pools[-1][0]

    def grow(self, to: int, batch: int = 1000) -> float:
        started = time.perf_counter()
        while self.count < to:
            self._slice(self.count, min(batch, to - self.count))
        return time.perf_counter() - started

    def _slice(self, start: int, size: int) -> None:
        from django.db import connection

        from fleet.inventory.models import GPU, Node, SoftwareStack
        from fleet.telemetry.models import ChangeLogEntry, Event, GPUStatus, NodeStatus

        rnd = self.random
        nodes = []
        for i in range(start, start + size):
            pool = self._pool_for(i)
            nodes.append(Node(hostname=f"bench-{i:05d}", provider_id=pool.provider_id, pool=pool,
                              delivery_form=pool.delivery_form, billing_mode=pool.billing_mode,
                              expected_gpu_count=8, expected_gpu_model=H100, state="active",
                              machine_id=f"{i:032x}", instance_type="p5.48xlarge"))
        Node.objects.bulk_create(nodes, batch_size=2000)
        stacks, node_status, gpus, events, changes = [], [], [], [], []
        faults: dict[int, str] = {}
        every = round(1 / FAULTY_SHARE)
        for i, node in enumerate(nodes, start):
            # Every 50th node has one fault, cycling through all kinds, so any 1,000 nodes hold each kind.
            fault = NODE_FAULTS[(i // every) % len(NODE_FAULTS)] if i % every == every - 1 else None
            if fault:
                faults[node.pk] = fault
                self.faulty += 1
            stack = dict(STACK)
            if fault == "drift":
                stack["driver_version"] = "560.35.03"
            elif fault == "cuda":
                stack.update(driver_version="535.54.03", cuda_driver_version="12.2")
            stacks.append(SoftwareStack(node=node, collected_at=NOW - timedelta(days=3), **stack))
            node_status.append(_node_status(node, fault, rnd))
            fabric_fault = FABRIC_FAULTS[(i // every) % len(FABRIC_FAULTS)] if i % every == every // 2 else None
            node_status[-1].fabric = _fabric(node, fabric_fault)
            self.faulty += fabric_fault is not None
            for index in range(8):
                gpus.append(GPU(node=node, index=index, uuid=f"GPU-{node.pk:08x}-{index:04x}-0000-0000-000000000000",
                                model=H100, memory_total_bytes=H100_MEMORY, serial=f"16523{node.pk:07d}{index}",
                                pci_bus_id=f"00000000:{0x18 + index:02x}:00.0", compute_capability="9.0"))
            events += _events(node, fault, rnd)
            if rnd.random() < 0.05:
                changes.append(ChangeLogEntry(node=node, at=NOW - timedelta(days=rnd.randint(1, 6)), field="boot_id",
                                              old="a", new="b", summary="rebooted"))
        SoftwareStack.objects.bulk_create(stacks, batch_size=2000)
        with connection.cursor() as cursor:
            cursor.execute("UPDATE inventory_node n SET current_stack_id = s.id FROM inventory_softwarestack s "
                           "WHERE s.node_id = n.id AND n.current_stack_id IS NULL")
        NodeStatus.objects.bulk_create(node_status, batch_size=2000)
        GPU.objects.bulk_create(gpus, batch_size=4000)
        GPUStatus.objects.bulk_create([_gpu_status(gpu, faults.get(gpu.node_id), rnd) for gpu in gpus],
                                      batch_size=4000)
        Event.objects.bulk_create(events, batch_size=4000)
        ChangeLogEntry.objects.bulk_create(changes, batch_size=4000)
        self.count += size


NODE_FAULTS = ["nvml", "count", "steal", "tcp", "iowait", "pipeline", "drift", "cuda", "memory", "ecc", "pcie",
               "thermal", "lost", "xid79", "xid13", "sxid", "notice", "silent", "checkpoint", "remap",
               # host checks (rules/host.py)
               "host_memory", "oom", "swap", "volume_full", "volume_ro", "volume_hung", "d_state", "peermem",
               "clock"]


def _system(fault, rnd) -> dict:
    """The report's `system` section as a current agent sends it (stored whole, read by the host rules): the
    numbers differ per node, so no two nodes share the decoded JSON."""
    volume = {"network": False, "read_only": False, "hung": False, "stalled_s": None, "inodes_used_pct": 2.0}
    system = {
        "cpu_busy_pct": round(rnd.uniform(10, 60), 2), "cpu_steal_pct": 0.1, "cpu_iowait_pct": 0.4,
        "cpu_count": 192, "mem_total_bytes": 2 * 1024**4, "mem_available_bytes": rnd.randint(1024**4, 2 * 1024**4),
        "load1": round(rnd.uniform(4, 40), 2), "load5": 12.0, "load15": 11.0,
        "disks": [{"name": f"nvme{i}n1", "read_bytes_per_s": round(rnd.uniform(0, 2e8), 1),
                   "write_bytes_per_s": round(rnd.uniform(0, 5e7), 1), "await_ms": 0.3, "util_pct": 10.0}
                  for i in range(2)],
        "tcp_retrans_pct": 0.02,
        "pressure": {r: {"some_avg10": round(rnd.uniform(0, 2), 2), "full_avg10": 0.0}
                     for r in ("cpu", "io", "memory")},
        "swap_total_bytes": 0, "swap_free_bytes": 0, "swap_in_pages_per_s": 0.0, "swap_out_pages_per_s": 0.0,
        "oom_kills": 0, "oom_kill_last_at": None,
        "volumes": [
            {**volume, "mount": "/", "fs_type": "ext4", "source": "/dev/nvme0n1p2", "size_bytes": 2 * 10**12,
             "used_pct": round(rnd.uniform(20, 60), 2)},
            {**volume, "mount": "/data", "fs_type": "xfs", "source": "/dev/nvme1n1", "size_bytes": 15 * 10**12,
             "used_pct": round(rnd.uniform(20, 80), 2)},
            {**volume, "mount": "/mnt/checkpoints", "fs_type": "nfs4", "source": "10.0.0.20:/export",
             "network": True, "size_bytes": 10**14, "used_pct": 48.0},
        ],
        "gpu_d_state": [],
        "peermem": {"module": "nvidia_peermem", "rdma_devices": 8, "nvidia_loaded": True},
        "clock": {"synced": True, "maxerror_us": rnd.randint(1000, 20000), "offset_s": 0.00001},
    }
    if fault == "host_memory":
        system["mem_available_bytes"] = 10 * 1024**3
    elif fault == "oom":
        system["oom_kills"], system["oom_kill_last_at"] = 1, (NOW - timedelta(minutes=5)).isoformat()
    elif fault == "swap":
        system["swap_in_pages_per_s"] = system["swap_out_pages_per_s"] = 20000.0
    elif fault == "volume_full":
        system["volumes"][1]["used_pct"] = 99.5
    elif fault == "volume_ro":
        system["volumes"][0]["read_only"] = True
    elif fault == "volume_hung":
        system["volumes"][2].update(hung=True, stalled_s=60.0)
    elif fault == "d_state":
        system["gpu_d_state"] = [{"pid": 4242, "name": "python", "devices": ["/dev/nvidia3", "/dev/nvidiactl"]}]
    elif fault == "peermem":
        system["peermem"]["module"] = None
    elif fault == "clock":
        system["clock"] = {"synced": False, "maxerror_us": 16_000_000, "offset_s": 0.0}
    return system


FABRIC_FAULTS = ["fabric_manager", "nvlink_errors", "ib_down"]
_FABRIC_DIGESTS: dict = {}


def _fabric(node, fault):
    """The digest ingestion stores for this node's report (built once per kind: identical across healthy nodes, as
    in a real fleet, where the cycle decodes each distinct digest once)."""
    from fleet.telemetry.services.fabric import fabric_digest

    metal = node.delivery_form.startswith("bare_metal")
    key = (metal, node.delivery_form == "cloud_shared", fault)
    if key not in _FABRIC_DIGESTS:
        gpus = [{"index": i, "pci_bus_id": f"00000000:{0x18 + i:02x}:00.0", "name": H100, "lost": False,
                 "nvlink": [1] * 18, "persistence_mode": True, "ecc_mode": {"current": True, "pending": True},
                 "mig_mode": {"current": False, "pending": False}, "gsp_firmware_version": "550.54.15",
                 "nvlink_errors": [], "fabric": {"state": "completed", "status": 0}} for i in range(8)]
        ports = [{"device": f"mlx5_{n}", "port": 1, "link_layer": "InfiniBand", "state": "ACTIVE",
                  "phys_state": "LinkUp", "rate_gbps": 400.0, "was_active": True, "recent": {}}
                 for n in range(8 if metal else 0)]
        report = {"gpus": gpus, "fabric": {
            "pci": {"gpus": [{"bus_id": g["pci_bus_id"][4:], "driver": "nvidia"} for g in gpus], "nvswitches": 4},
            "fabric_manager": {"installed": True, "running": True}, "imex": None, "infiniband": ports,
            "window_s": 900}}
        if key[1]:  # a vGPU guest sees no NVSwitch, no fabric, no NVLink
            report["fabric"]["pci"]["nvswitches"] = 0
            for gpu in gpus:
                gpu.update(fabric=None, nvlink=None, mig_mode=None, nvlink_errors=None)
        if fault == "fabric_manager" and not key[1]:
            report["fabric"]["fabric_manager"]["running"] = False
        elif fault == "nvlink_errors":
            gpus[3]["nvlink_errors"] = [{"link": 2, "crc_flit": 900, "recent": {"crc_flit": 400}}]
        elif fault == "ib_down" and ports:
            ports[5].update(state="DOWN", phys_state="Polling")
        _FABRIC_DIGESTS[key] = fabric_digest(report)
    return _FABRIC_DIGESTS[key]


def _node_status(node, fault, rnd):
    from fleet.telemetry.models import NodeStatus

    spot = node.billing_mode == "spot"
    status = NodeStatus(
        node=node, received_at=NOW - timedelta(seconds=rnd.randint(0, 14)), collected_at=NOW - timedelta(seconds=15),
        sequence=1000, agent_instance_id="bench", agent_version="0.1.0", interval_s=15, nvml_status="ok",
        gpu_count_seen=8, cpu_busy_pct=rnd.uniform(10, 60), cpu_steal_pct=rnd.uniform(0, 2),
        cpu_iowait_pct=rnd.uniform(0, 3), mem_total_bytes=2 * 1024**4, mem_available_bytes=1024**4,
        load1=rnd.uniform(4, 40), disk_await_ms_max=rnd.uniform(0.1, 5), disk_util_pct_max=rnd.uniform(0, 30),
        tcp_retrans_pct=rnd.uniform(0, 0.2), lost_gpus=[],
        checkpoint_age_s=rnd.uniform(30, 600) if spot else None,
        checkpoint={"dirs": ["/ckpt"]} if spot else {}, system=_system(fault, rnd))
    if fault == "nvml":
        status.nvml_status, status.nvml_message = "driver_not_loaded", "NVML: Driver Not Loaded"
    elif fault == "count":
        status.gpu_count_seen = 7
    elif fault == "steal" and node.delivery_form.startswith("cloud"):
        status.cpu_steal_pct = 25.0
    elif fault == "tcp":
        status.tcp_retrans_pct = 3.5
    elif fault == "iowait":
        status.cpu_iowait_pct = 40.0
    elif fault == "pipeline":
        status.cpu_busy_pct = 98.0
    elif fault == "lost":
        status.lost_gpus = ["00000000:1b:00.0"]
    elif fault == "notice":
        status.notice_kind, status.notice_deadline = "terminate", NOW + timedelta(seconds=100)
    elif fault == "silent":
        status.silent, status.silent_since = True, NOW - timedelta(minutes=2)
    elif fault == "checkpoint" and spot:
        status.checkpoint_age_s = 3600.0
    return status


def _gpu_status(gpu, fault, rnd):
    from fleet.telemetry.models import GPUStatus

    idle = rnd.random() < 0.1
    util = 0.0 if idle else rnd.uniform(60, 100)
    status = GPUStatus(
        gpu=gpu, node_id=gpu.node_id, collected_at=NOW - timedelta(seconds=15), utilization_gpu_pct=util,
        utilization_memory_pct=util / 2, memory_used_bytes=0 if idle else int(H100_MEMORY * rnd.uniform(0.3, 0.9)),
        memory_total_bytes=H100_MEMORY, temperature_c=rnd.uniform(35, 75), power_draw_w=rnd.uniform(80, 690),
        power_limit_w=700.0, sm_clock_mhz=1980, clock_event_reasons_mask=0x1 if idle else 0x4,
        clock_event_reasons=["GpuIdle"] if idle else ["SwPowerCap"], ecc_volatile_corrected=0,
        ecc_volatile_uncorrected=0, ecc_aggregate_corrected=rnd.randint(0, 3), ecc_aggregate_uncorrected=0,
        retired_pages_count=0, retired_pages_pending=False, remapped_rows_correctable=0,
        remapped_rows_uncorrectable=0, remapped_rows_pending=False, remapped_rows_failure=False,
        pcie_gen_current=1 if idle else 5, pcie_gen_max=5, pcie_width_current=16, pcie_width_max=16,
        process_count=0 if idle else 1, process_memory_bytes=0 if idle else 30 * 2**30,
        processes=[] if idle else [{"pid": 4000 + gpu.index, "used_memory_bytes": 30 * 2**30, "name": "python"}])
    if gpu.index != 3:
        return status
    if fault == "memory":
        status.utilization_gpu_pct, status.memory_used_bytes = 90.0, int(H100_MEMORY * 0.98)
    elif fault == "ecc":
        status.ecc_volatile_uncorrected = 2
    elif fault == "pcie":
        status.pcie_width_current = 8
    elif fault == "thermal":
        status.clock_event_reasons_mask, status.temperature_c = 0x40 | 0x4, 91.0
    elif fault == "lost":
        status.lost, status.utilization_gpu_pct, status.memory_used_bytes = True, None, None
    elif fault == "remap":
        status.remapped_rows_pending = True
    elif fault == "pipeline":
        status.utilization_gpu_pct = 5.0
    return status


def _events(node, fault, rnd):
    from fleet.telemetry.models import Event

    events = []
    if rnd.random() < 0.05:  # a week of older, mostly harmless history on some nodes
        for _ in range(rnd.randint(1, 4)):
            code = rnd.choice([13, 31, 43, 79, 48])
            events.append(Event(node=node, kind="xid", code=code, severity="warning",
                                at=NOW - timedelta(hours=rnd.uniform(2, 160)), pci_bus_id="0000:1b:00.0",
                                raw=f"NVRM: Xid (PCI:0000:1b:00): {code}, pid=1234, name=python"))
    if fault in ("xid79", "xid13", "lost"):
        code = 13 if fault == "xid13" else 79
        events.append(Event(node=node, kind="xid", code=code, severity="critical",
                            at=NOW - timedelta(seconds=rnd.randint(5, 600)), pci_bus_id="0000:1b:00.0",
                            raw=f"NVRM: Xid (PCI:0000:1b:00): {code}, pid=<unknown>, name=<unknown>"))
    elif fault == "sxid":
        events.append(Event(node=node, kind="sxid", code=20034, severity="critical", at=NOW - timedelta(minutes=3),
                            message="Fatal, Link 48 LTSSM Fault Up",
                            raw="nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up"))
    elif fault == "notice":
        events.append(Event(node=node, kind="preemption_notice", severity="critical",
                            at=NOW - timedelta(seconds=20), message="terminate",
                            detail={"notice": {"kind": "terminate", "deadline": (NOW + timedelta(seconds=100))
                                               .isoformat(), "source": "aws.spot.instance-action"}}))
    return events


def _clear_health_state() -> None:
    from fleet.health.models import Finding, HealthCondition

    Finding.objects.all().delete()
    HealthCondition.objects.all().delete()


def _cycle(label: str, now: datetime, node_ids=None, slowest: int = 0) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from fleet.health.services.evaluation import evaluate

    connection.queries_log.clear()
    with CaptureQueriesContext(connection) as captured:
        started, cpu_started = time.perf_counter(), time.process_time()
        result = evaluate(now=now, node_ids=node_ids)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    # CaptureQueriesContext also lists BEGIN and COMMIT, which the service's own counter does not see.
    row = {"label": label, "seconds": seconds, "cpu": cpu, "queries": len(captured.captured_queries),
           "nodes": result.nodes, "opened": result.opened, "updated": result.updated, "resolved": result.resolved,
           "pending": result.pending}
    print(f"  {label:<44} {seconds * 1000:6.0f} ms (this process's CPU {cpu * 1000:4.0f} ms)  "
          f"{row['queries']:3d} queries  nodes {result.nodes:>6}  "
          f"opened {result.opened:>4}  updated {result.updated:>4}  pending {result.pending:>4}", flush=True)
    queries = sorted(captured.captured_queries, key=lambda q: float(q["time"]), reverse=True)
    for query in queries[:slowest]:  # the time until the rows are in, not the Python that turns them into facts
        print(f"    {float(query['time']) * 1000:6.0f} ms  {query['sql'][:110]}…", flush=True)
    return row


HOST_RULES = ["host_memory_exhausted", "host_oom_kill", "swap_storm", "volume_full", "volume_read_only",
              "volume_hung", "clock_unsynced", "peermem_missing", "gpu_d_state"]


def _host_checks_share(now: datetime, runs: int = 3) -> tuple[float, float]:
    """The steady cycle's CPU with and without the host rules (rules/host.py) and the `system` keys they load:
    the baseline is the same cycle with those rules disabled and the keys not selected. Each cycle runs in a
    rolled-back transaction, so both see the same state. Returns the best (with, without) CPU seconds."""
    from django.db import transaction

    from fleet.health.models import Rule
    from fleet.health.services import facts
    from fleet.health.services.evaluation import evaluate

    def best() -> float:
        times = []
        for i in range(runs):
            with transaction.atomic():
                started = time.process_time()
                evaluate(now=now + timedelta(seconds=15 * i))
                times.append(time.process_time() - started)
                transaction.set_rollback(True)
        return min(times)

    with_host = best()
    from django.db.models import TextField, Value

    saved = facts._system_text, facts._system_facts
    facts._system_text, facts._system_facts = lambda: Value(None, output_field=TextField()), lambda status, section: {}
    Rule.objects.filter(slug__in=HOST_RULES).update(enabled=False)
    try:
        without = best()
    finally:
        facts._system_text, facts._system_facts = saved
        Rule.objects.filter(slug__in=HOST_RULES).update(enabled=True)
    return with_host, without


def _naive(node_ids: list[int], now: datetime) -> dict:
    """The design the set-based cycle replaces: evaluate one node at a time."""
    from fleet.health.services.evaluation import evaluate

    queries = 0
    started = time.perf_counter()
    for node_id in node_ids:
        queries += evaluate(now=now, node_ids=[node_id]).queries
    seconds = time.perf_counter() - started
    print(f"  {'naive per-node evaluation, ' + str(len(node_ids)) + ' nodes':<44} {seconds * 1000:8.0f} ms  "
          f"{queries} queries (+ BEGIN/COMMIT each)", flush=True)
    return {"seconds": seconds, "queries": queries}


def _worker_latency(database_url: str, var_dir: str, samples: int) -> list[float]:
    """Urgent path with a real worker: commit an Xid 79, enqueue evaluate_nodes, wait for the finding."""
    from django.utils import timezone

    from fleet.health.models import Finding
    from fleet.health.tasks import evaluate_nodes
    from fleet.inventory.models import GPU, Node
    from fleet.telemetry.models import Event

    log = Path(var_dir) / "worker.log"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.local", "DATABASE_URL": database_url,
           "FLEET_VAR_DIR": var_dir, "PYTHONUNBUFFERED": "1"}
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--loglevel", "INFO",
             "--without-gossip", "--without-mingle", "--without-heartbeat", "--purge", "-n", "bench@%h"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while b"ready." not in log.read_bytes():
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(log.read_text()[-3000:])
            time.sleep(0.1)
        healthy = list(Node.objects.filter(events__isnull=True, status__silent=False, status__nvml_status="ok")
                       .values_list("pk", flat=True)[:samples])
        latencies = []
        for node_id in healthy:
            gpu = GPU.objects.get(node_id=node_id, index=0)
            Event.objects.create(node_id=node_id, gpu=gpu, kind="xid", code=79, severity="critical",
                                 at=timezone.now(), raw="NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.")
            started = time.perf_counter()
            evaluate_nodes.delay(node_ids=[node_id])
            while not Finding.objects.filter(node_id=node_id, rule__slug="xid", state="open").exists():
                if time.perf_counter() - started > 30:
                    raise RuntimeError("no finding after 30 s:\n" + log.read_text()[-3000:])
                time.sleep(0.01)
            latencies.append(time.perf_counter() - started)
        return latencies
    finally:
        worker.terminate()
        worker.wait(timeout=15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=os.environ.get("BENCH_RULES_DATABASE_URL",
                                                                 "postgres://postgres@127.0.0.1:5432/fleet_bench_rules"))
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--naive", type=int, default=1000, help="nodes for the per-node baseline (0: skip)")
    parser.add_argument("--no-worker", action="store_true", help="skip the real-worker urgent-path latency")
    parser.add_argument("--worker-samples", type=int, default=10)
    args = parser.parse_args()

    var_dir = tempfile.mkdtemp(prefix="bench-rules-")
    _ensure_database(args.database_url)
    _django(args.database_url, var_dir)
    from django import db

    print(f"rule evaluation benchmark — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, "
          f"PostgreSQL {db.connection.cursor().connection.info.server_version}, "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    _reset()
    fleet = Fleet()

    built = fleet.grow(args.small)
    print(f"built {fleet.count} nodes ({fleet.count * 8} GPUs, {fleet.faulty} faulty) in {built:.1f} s", flush=True)
    db.connection.cursor().execute("ANALYZE")
    small_first = _cycle(f"set-based cycle, {fleet.count} nodes (first)", NOW)
    small = _cycle(f"set-based cycle, {fleet.count} nodes (steady)", NOW + timedelta(seconds=15))
    naive = None
    if args.naive:
        from fleet.inventory.models import Node

        ids = list(Node.objects.order_by("pk").values_list("pk", flat=True)[:args.naive])
        _clear_health_state()
        _cycle(f"set-based cycle, {fleet.count} nodes (first, again)", NOW)
        naive = _naive(ids, NOW + timedelta(seconds=15))
        if len(ids) == fleet.count:
            print(f"  → the set-based cycle is {naive['seconds'] / small['seconds']:.0f}× faster than the naive one "
                  f"on the same {len(ids)} nodes ({naive['queries']} vs {small['queries']} queries)", flush=True)

    built = fleet.grow(args.nodes)
    print(f"grew to {fleet.count} nodes ({fleet.count * 8} GPUs, {fleet.faulty} faulty) in {built:.1f} s", flush=True)
    db.connection.cursor().execute("ANALYZE")
    # Same starting point and clock as the 1,000-node run, so the two differ only in the fleet size.
    _clear_health_state()
    large_first = _cycle(f"set-based cycle, {fleet.count} nodes (first)", NOW)
    large = _cycle(f"set-based cycle, {fleet.count} nodes (steady)", NOW + timedelta(seconds=15), slowest=3)
    _cycle(f"set-based cycle, {fleet.count} nodes (steady)", NOW + timedelta(seconds=30))
    with_host, without_host = _host_checks_share(NOW + timedelta(seconds=45))
    print(f"  host checks (9 rules + the system keys they load), {fleet.count} nodes: steady-cycle CPU "
          f"{with_host * 1000:.0f} ms with, {without_host * 1000:.0f} ms without "
          f"(+{(with_host - without_host) * 1000:.0f} ms, {with_host / without_host:.2f}×)", flush=True)

    print(f"summary (load average now {os.getloadavg()[0]:.2f}):", flush=True)
    print(f"  queries per cycle: {small_first['queries']}/{small['queries']} at {args.small} nodes, "
          f"{large_first['queries']}/{large['queries']} at {fleet.count} nodes (first/steady)")
    print(f"  {fleet.count}-node steady cycle: {large['seconds']:.2f} s (target < 2 s); "
          f"{large['seconds'] / small['seconds']:.1f}× the {args.small}-node cycle for "
          f"{fleet.count / args.small:.0f}× the nodes")
    if naive and args.naive == args.small:
        estimate = naive["seconds"] / args.naive * fleet.count
        print(f"  naive per-node evaluation would take ~{estimate:.0f} s for {fleet.count} nodes "
              f"({estimate / large['seconds']:.0f}× the set-based cycle)")

    if not args.no_worker:
        latencies = _worker_latency(args.database_url, var_dir, args.worker_samples)
        print(f"  urgent path, real worker (Xid 79 committed → evaluate_nodes.delay → finding visible), "
              f"{len(latencies)} samples: median {statistics.median(latencies) * 1000:.0f} ms, "
              f"max {max(latencies) * 1000:.0f} ms", flush=True)


if __name__ == "__main__":
    main()
