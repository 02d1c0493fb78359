"""Done-when for reading the kernel log as it is written: the real agent daemon (simulated NVML) blocks on a FIFO
standing in for /dev/kmsg; an Xid record written to it reaches the live API as an open finding without the agent's
timer poll (switched off here), and the finding's step, layer, party and the node's headline are the Xid policy's."""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests
from django.utils import timezone

from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import Node
from fleet.telemetry.models import Event, NodeStatus
from fleet.telemetry.services.enrollment import enrollment_token_create
from fleet_agent.client import ControlPlaneClient
from fleet_agent.config import load_config
from fleet_agent.credentials import credential_path
from fleet_agent.daemon import Daemon
from fleet_agent.enroll import enroll
from fleet_agent.simnvml import SimulatedGpu, SimulatedNvml
from tests.factories import PoolFactory, ProviderFactory, UserFactory
from tests.processes import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

FIXTURES = Path(__file__).parents[1] / "agents" / "fixtures"


def test_an_xid_written_to_kmsg_becomes_an_open_finding_in_the_api(live_server, tmp_path, seeded_catalog, token_for):
    operator = UserFactory(username="kmsg-op", role="operator")
    provider = ProviderFactory(kind="own", cloud="")
    pool = PoolFactory(provider=provider, delivery_form="bare_metal_owned", billing_mode="reserved")
    _, token = enrollment_token_create(actor=operator, name="kmsg", provider=provider, pool=pool,
                                       delivery_form="bare_metal_owned", billing_mode="reserved")
    proc = tmp_path / "proc"
    shutil.copytree(FIXTURES / "proc" / "t0", proc)
    (proc / "sys/kernel/random/boot_id").write_text(f"{uuid.uuid4()}\n")
    # kmsg stamps below are this machine's monotonic clock (µs since boot): make the fixture's boot time and
    # uptime agree with it and with the test's wall clock, as on a real machine (btime + stamp = now).
    uptime = time.monotonic()
    stat = proc / "stat"
    stat.write_text("".join(f"btime {int(time.time() - uptime)}\n" if line.startswith("btime ") else line
                            for line in stat.read_text().splitlines(keepends=True)))
    (proc / "uptime").write_text(f"{uptime:.2f} {uptime:.2f}\n")
    fifo = tmp_path / "kmsg"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    config = load_config(config_file=None, environ={}, flags={
        "server": live_server.url, "state_dir": str(tmp_path / "state"), "interval_s": "60", "notice_poll_s": "5",
        "kernel_log": f"kmsg:{fifo}", "cloud": "none", "nvml_events": "off", "proc_root": str(proc),
        "host_root": str(FIXTURES / "host"), "stack_refresh_s": "3600"})
    enroll(ControlPlaneClient(live_server.url), token,
           {"machine_id": uuid.uuid4().hex, "hostname": "kmsg-01", "agent_version": "0.1.0", "gpu_count": 8},
           credential_file=credential_path(tmp_path / "state"))
    nvml = SimulatedNvml([SimulatedGpu.from_model("H100-SXM-80GB", i, node_key="kmsg") for i in range(8)])
    daemon = Daemon(config, nvml_module=nvml)
    daemon.core.collect_if_urgent = lambda: None  # no timer poll: only the streaming read can deliver
    runner = threading.Thread(target=daemon.run, daemon=True)
    runner.start()
    try:
        node = Node.objects.get()
        wait_for(lambda: NodeStatus.objects.filter(node=node).exists(), timeout=30, what="the first report")
        bus = nvml.gpus[3].bus_id[4:].rsplit(".", 1)[0]
        usec = int(time.monotonic() * 1e6)  # kmsg stamps are microseconds since boot (the agent adds btime)
        os.write(writer, f"3,900,{usec},-;NVRM: Xid (PCI:{bus}): 79, pid='<unknown>', name=<unknown>, GPU has "
                         f"fallen off the bus.\n".encode())
        wait_for(lambda: Event.objects.filter(node=node, kind="xid", code=79).exists(), timeout=15,
                 what="the Xid in the urgent report")
        evaluate(node_ids=[node.pk], now=timezone.now())
        _, key = token_for("viewer")
        api = requests.Session()
        api.headers["Authorization"] = f"Token {key}"
        (finding,) = api.get(f"{live_server.url}/api/v1/findings/?node={node.pk}&rule=xid&state=open",
                             timeout=10).json()["results"]
        assert (finding["step"], finding["layer"], finding["responsible_party"], finding["severity"]) == (
            "platform_hardware", "hardware", "hardware_vendor", "critical")
        assert finding["summary"].startswith("Xid 79 on GPU 3")
        headline = api.get(f"{live_server.url}/api/v1/nodes/{node.pk}/triage/", timeout=10).json()["headline"]
        assert headline.startswith("Step 4 — Xid 79 on GPU 3")
    finally:
        daemon.stop_event.set()
        runner.join(timeout=20)
        os.close(writer)
