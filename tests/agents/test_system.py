"""The /proc collector on fixture snapshots in real kernel formats."""

from __future__ import annotations

import logging

from fleet_agent.collectors.system import SystemCollector


class FakeClock:
    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def _two_samples(proc_tree):
    clock = FakeClock()
    collector = SystemCollector(proc_tree("t0"), clock=clock)
    collector.prime()
    proc_tree("t1")
    clock.now += 10.0
    return collector.collect()


def test_rates_from_two_samples(proc_tree):
    system = _two_samples(proc_tree)
    # t0→t1: 2000 ticks, of which user+nice+system+irq+softirq 850, steal 100, iowait 50
    assert system["cpu_busy_pct"] == 42.5
    assert system["cpu_steal_pct"] == 5.0
    assert system["cpu_iowait_pct"] == 2.5
    assert system["cpu_count"] == 2
    assert system["mem_total_bytes"] == 16384000 * 1024 and system["mem_available_bytes"] == 8192000 * 1024
    assert (system["load1"], system["load5"], system["load15"]) == (1.75, 1.25, 0.95)
    assert system["tcp_retrans_pct"] == 0.2  # 20 retransmitted of 10000 sent
    assert system["pressure"] == {
        "cpu": {"some_avg10": 1.5, "full_avg10": 0.0},
        "io": {"some_avg10": 2.25, "full_avg10": 1.0},
        "memory": {"some_avg10": 0.0, "full_avg10": 0.0},
    }


def test_disks_in_all_three_diskstats_layouts_without_partitions_or_pseudo_devices(proc_tree):
    disks = {d["name"]: d for d in _two_samples(proc_tree)["disks"]}
    assert set(disks) == {"nvme0n1", "sda", "dm-0"}  # 17-, 11- and 15-field lines; no loop/ram/partitions
    nvme = disks["nvme0n1"]
    assert nvme["read_bytes_per_s"] == 20000 * 512 / 10 and nvme["write_bytes_per_s"] == 60000 * 512 / 10
    assert nvme["await_ms"] == 1.0  # (50 + 350) ms over 400 I/Os
    assert nvme["util_pct"] == 25.0  # 2500 ms busy in 10 s
    assert disks["sda"] == {
        "name": "sda",
        "read_bytes_per_s": 0.0,
        "write_bytes_per_s": 0.0,
        "await_ms": 0.0,
        "util_pct": 0.0,
    }
    assert disks["dm-0"]["await_ms"] == 0.2 and disks["dm-0"]["util_pct"] == 0.1


def test_first_collect_without_prime_has_null_rates_but_everything_else(proc_tree):
    system = SystemCollector(proc_tree("t0"), clock=FakeClock()).collect()
    assert system["cpu_busy_pct"] is None and system["disks"] is None and system["tcp_retrans_pct"] is None
    assert system["mem_total_bytes"] == 16384000 * 1024 and system["load1"] == 1.5


def test_garbage_lines_are_skipped_with_one_warning_each(proc_tree, caplog):
    with caplog.at_level(logging.WARNING, logger="fleet_agent.collectors.system"):
        clock = FakeClock()
        collector = SystemCollector(proc_tree("t0"), clock=clock)
        collector.prime()
        proc_tree("t1")
        for _ in range(3):
            clock.now += 10
            system = collector.collect()
    assert system["disks"] and all(d["name"] != "sdb" for d in system["disks"])
    messages = [r.getMessage() for r in caplog.records]
    assert sum("this line is garbage" in m for m in messages) == 1
    assert sum("sdb" in m for m in messages) == 1


def test_malformed_and_missing_files_give_nulls_not_a_crash(tmp_path, caplog):
    import shutil

    from tests.agents.conftest import FIXTURES

    root = tmp_path / "proc"
    shutil.copytree(FIXTURES / "proc" / "broken", root)
    clock = FakeClock()
    collector = SystemCollector(root, clock=clock)
    with caplog.at_level(logging.WARNING):
        collector.prime()
        clock.now += 5
        system = collector.collect()
    assert system == {
        "cpu_busy_pct": None,
        "cpu_steal_pct": None,
        "cpu_iowait_pct": None,
        "cpu_count": None,
        "mem_total_bytes": None,
        "mem_available_bytes": None,
        "load1": None,
        "load5": None,
        "load15": None,
        "disks": [],
        "tcp_retrans_pct": None,
        "pressure": None,
        "swap_total_bytes": None,
        "swap_free_bytes": None,
        "swap_in_pages_per_s": None,
        "swap_out_pages_per_s": None,
        "oom_kills": None,
        "oom_kill_last_at": None,
    }
    assert any("net/snmp" in r.getMessage() for r in caplog.records)


def test_unreadable_root_is_survivable(tmp_path):
    system = SystemCollector(tmp_path / "does-not-exist").collect()
    assert system["cpu_count"] is None and system["pressure"] is None


def test_counter_reset_does_not_produce_negative_rates(proc_tree):
    clock = FakeClock()
    collector = SystemCollector(proc_tree("t1"), clock=clock)
    collector.prime()
    proc_tree("t0")  # counters went backwards (e.g. a container's /proc was remounted)
    clock.now += 10
    system = collector.collect()
    assert system["cpu_busy_pct"] is None and system["tcp_retrans_pct"] is None
    assert all(d["read_bytes_per_s"] >= 0 and d["util_pct"] >= 0 for d in system["disks"])


def test_real_proc_of_this_machine():
    collector = SystemCollector()
    collector.prime()
    system = collector.collect()
    assert system["cpu_count"] >= 1 and system["mem_total_bytes"] > 0
