"""The console in real Chromium against a live server: log in, filter nodes, open the node with the Xid 79
finding and see it on the hardware layer with its responsible party, and compare a cloud node's boundary
with an owned bare-metal node's.

Data is seeded through the ORM here until the demo fleet (`manage.py demo_fleet`) exists; then these tests
should run against it instead. Screenshots land in test-artifacts/e2e/<test>/.
"""

from datetime import timedelta

import pytest
from django.urls import Resolver404, resolve
from django.utils import timezone

from fleet.accounts.choices import Role
from fleet.inventory.choices import BillingMode, DeliveryForm, Layer, Owner, ProviderKind
from fleet.inventory.models import BoundaryOverride
from fleet.inventory.selectors import node_boundary
from tests.factories import GPUFactory, NodeFactory, PoolFactory, ProviderFactory, UserFactory

from .conftest import ARTIFACTS, run_console_script

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

PASSWORD = "pw-for-tests-123"  # UserFactory's default
CLOUD_NODE = "aws-spot-xid79"
METAL_NODE = "own-bm-xid79"


def seed_fleet() -> dict:
    """Two providers, a cloud spot pool and our own bare metal, a few nodes each; the two Xid 79 nodes."""
    user = UserFactory(username="e2e-operator", role=Role.OPERATOR)
    UserFactory(username="e2e-viewer", role=Role.VIEWER)
    aws = ProviderFactory(name="AWS", slug="aws", kind=ProviderKind.CLOUD, cloud="aws")
    own = ProviderFactory(name="Own DC", slug="own-dc", kind=ProviderKind.OWN, cloud="")
    # Our own datacenter: the facility is ours too (docs/decisions.md).
    BoundaryOverride.objects.create(provider=own, layer=Layer.FACILITY, owner=Owner.US, note="own datacenter")
    spot = PoolFactory(name="aws-h100-spot", provider=aws, delivery_form=DeliveryForm.CLOUD_DEDICATED,
                       billing_mode=BillingMode.SPOT)
    metal = PoolFactory(name="own-h100", provider=own, delivery_form=DeliveryForm.BARE_METAL_OWNED,
                        billing_mode=BillingMode.RESERVED)
    cloud_node = NodeFactory(hostname=CLOUD_NODE, provider=aws, pool=spot, delivery_form=spot.delivery_form,
                             billing_mode=BillingMode.SPOT, instance_type="p5.48xlarge")
    metal_node = NodeFactory(hostname=METAL_NODE, provider=own, pool=metal, delivery_form=metal.delivery_form,
                             billing_mode=BillingMode.RESERVED)
    for i in range(2, 6):
        NodeFactory(hostname=f"aws-spot-{i:04d}", provider=aws, pool=spot, delivery_form=spot.delivery_form,
                    billing_mode=BillingMode.SPOT)
        NodeFactory(hostname=f"own-bm-{i:04d}", provider=own, pool=metal, delivery_form=metal.delivery_form,
                    billing_mode=BillingMode.RESERVED)
    for node in (cloud_node, metal_node):
        for index in range(8):
            GPUFactory(node=node, index=index)
    seed_telemetry(cloud_node)
    return {"user": user, "cloud": cloud_node, "metal": metal_node}


def seed_telemetry(node) -> None:
    """An hour of one-minute samples and a latest status, so live metrics and sparklines have data."""
    from fleet.telemetry.models import Event, GPUSample, GPUStatus, NodeSample, NodeStatus

    now = timezone.now()
    gpus = list(node.gpus.order_by("index"))
    NodeStatus.objects.create(node=node, received_at=now, collected_at=now, sequence=60, agent_instance_id="e2e",
                              agent_version="0.1.0", cpu_busy_pct=35.0, cpu_steal_pct=0.4, cpu_iowait_pct=1.2,
                              mem_total_bytes=2 * 1024**4, mem_available_bytes=1024**4, load1=12.5,
                              tcp_retrans_pct=0.05, gpu_count_seen=len(gpus) - 1)
    for gpu in gpus:
        lost = gpu.index == 0  # the GPU behind the Xid 79
        GPUStatus.objects.create(gpu=gpu, node=node, collected_at=now, lost=lost,
                                 utilization_gpu_pct=None if lost else 80.0 + gpu.index,
                                 memory_used_bytes=None if lost else 60 * 1024**3, memory_total_bytes=80 * 1024**3,
                                 temperature_c=None if lost else 60.0 + gpu.index, power_draw_w=None if lost else 550.0,
                                 power_limit_w=700.0, pcie_gen_current=5, pcie_gen_max=5, pcie_width_current=16,
                                 pcie_width_max=16, ecc_volatile_uncorrected=0, process_count=0 if lost else 1)
    GPUSample.objects.bulk_create([
        GPUSample(gpu=gpu, at=now - timedelta(minutes=minute), utilization_gpu_pct=50 + (minute * 7 + gpu.index) % 45,
                  temperature_c=55 + minute % 15, memory_used_bytes=60 * 1024**3, power_draw_w=500.0)
        for gpu in gpus for minute in range(60)
    ])
    NodeSample.objects.bulk_create([
        NodeSample(node=node, at=now - timedelta(minutes=minute), cpu_busy_pct=30 + minute % 20,
                   gpu_util_avg_pct=60 + minute % 30)
        for minute in range(60)
    ])
    Event.objects.create(node=node, gpu=gpus[0], kind="xid", code=79, severity="critical",
                         at=now - timedelta(minutes=3), pci_bus_id=gpus[0].pci_bus_id,
                         message="GPU has fallen off the bus.")


def seed_xid79_findings(nodes: list) -> str | None:
    """An open Xid 79 finding on each node's hardware layer. Returns why it cannot be done, or None."""
    try:
        resolve("/api/v1/findings/")
    except Resolver404:
        return "the health API (/api/v1/findings/, issue 5) is not in this build, so the console cannot list findings"
    try:
        from fleet.health.models import Finding, Rule
    except ImportError as exc:
        return f"fleet.health has no Finding/Rule models yet ({exc})"
    now = timezone.now()
    rule = Rule.objects.filter(slug="xid").first()
    if rule is None:
        rule = Rule.objects.create(slug="e2e-xid", title="Xid error", step="platform_hardware", layer=Layer.HARDWARE,
                                   severity="critical", scope="gpu", duration_s=0, clear_hold_s=600, params={})
    fields = {f.name for f in Finding._meta.get_fields()}
    for node in nodes:
        gpu = node.gpus.order_by("index").first()
        party = next(cell.owner for cell in node_boundary(node=node) if cell.layer == Layer.HARDWARE)
        values = {
            "rule": rule, "node": node, "gpu": gpu, "subject": f"gpu:{gpu.pk}:xid:79", "state": "open",
            "step": "platform_hardware", "layer": Layer.HARDWARE, "severity": "critical",
            "summary": f"Xid 79: GPU {gpu.index} has fallen off the bus", "responsible_party": party,
            "responsibility_source": "default",
            "action_kind": "provider_ticket" if party == Owner.PROVIDER else "vendor_rma",
            "recommended_action": (
                "Open a ticket with AWS with the evidence bundle; ask for the instance to be replaced if it repeats."
                if party == Owner.PROVIDER else
                "Our hardware, with vendor support: drain the node, then reboot. If it repeats, open an RMA."),
            "evidence": {"xid": 79, "pci_bus_id": gpu.pci_bus_id,
                         "log": "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', GPU has fallen off the bus."},
            "xid_policy_version": 1, "first_seen": now - timedelta(minutes=3),
            "opened_at": now - timedelta(minutes=3), "last_seen": now,
        }
        try:
            Finding.objects.create(**{key: value for key, value in values.items() if key in fields})
        except Exception as exc:  # the model is still moving; say what broke instead of erroring the suite
            return f"could not create a Finding with the fields this test knows ({exc})"
    return None


def _run(live_server_url, *, expect_finding: bool):
    artifacts = ARTIFACTS / ("xid79-finding" if expect_finding else "boundary")
    result = run_console_script(base_url=live_server_url, artifacts=artifacts, env={
        "E2E_USERNAME": "e2e-operator", "E2E_VIEWER_USERNAME": "e2e-viewer", "E2E_PASSWORD": PASSWORD,
        "E2E_CLOUD_NODE": CLOUD_NODE, "E2E_METAL_NODE": METAL_NODE, "E2E_CLOUD_PROVIDER": "AWS",
        "E2E_EXPECT_FINDING": "1" if expect_finding else "0",
    })
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"console e2e failed (screenshots in {artifacts}):\n{output[-6000:]}"
    for name in ("01-login", "02-nodes-filtered", "03-cloud-node", "04-metal-node", "05-metal-node-zh", "06-overview",
                 "10-rules-viewer"):
        assert (artifacts / f"{name}.png").stat().st_size > 0
    return output


def test_login_filter_and_boundary_differs_between_cloud_and_owned_metal(live_server_url, committed_db):
    seed_fleet()
    output = _run(live_server_url, expect_finding=False)
    assert "hardware is owned by the provider" in output
    assert "hardware is ours with the vendor" in output
    assert "a viewer sees no write controls on the rules page (0 found)" in output


def test_xid79_finding_sits_on_the_hardware_layer_with_its_responsible_party(live_server_url, committed_db):
    fleet = seed_fleet()
    reason = seed_xid79_findings([fleet["cloud"], fleet["metal"]])
    if reason:
        pytest.skip(f"Xid 79 placement not checked: {reason}")
    output = _run(live_server_url, expect_finding=True)
    assert "cloud node: the Xid 79 finding sits on the hardware layer" in output
    assert "owned bare metal: responsible party highlighted is us + vendor" in output
