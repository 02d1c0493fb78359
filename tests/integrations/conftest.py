from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.health.services.evaluation import evaluate
from fleet.integrations.models import RoutingRule
from fleet.integrations.services.integrations import integration_create
from fleet.inventory.choices import DeliveryForm, ProviderKind
from fleet.inventory.models import GPU
from tests.factories import PoolFactory, ProviderFactory, SiteFactory, UserFactory
from tests.health.factories import EventFactory, healthy_node

from .fakes import FakeServer

XID_79 = ("[Tue Dec  1 11:59:58 2026] NVRM: Xid (PCI:0000:1c:00): 79, pid=<unknown>, name=<unknown>, "
          "GPU has fallen off the bus.")


@pytest.fixture
def admin_user(db):
    return UserFactory(username="integrations-admin", role="admin")


@pytest.fixture
def make_integration(admin_user):
    def make(kind: str, config: dict, secrets: dict | None = None, *, rules: list[dict] | None = None, **extra):
        data = {"name": extra.pop("name", f"{kind}-{len(config)}-{id(config)}"), "kind": kind, "config": config,
                **extra}
        integration, token = integration_create(data=data, secrets=secrets or {}, actor=admin_user)
        for index, match in enumerate(rules or []):
            RoutingRule.objects.create(integration=integration, position=index, match=match)
        integration.inbound_token = token
        return integration

    return make


@pytest.fixture
def server():
    """Start a fake API around an app: `server(app)`; every server stops at the end of the test."""
    started = []

    def start(app):
        fake = FakeServer(app)
        started.append(fake)
        return fake

    yield start
    for fake in started:
        fake.close()


@pytest.fixture
def hosted_node():
    """A provider-hosted bare-metal server in a region, healthy, with GPU serials."""
    now = timezone.now()
    provider = ProviderFactory(name="Hostco", slug="hostco", kind=ProviderKind.IDC, cloud="",
                               support_contact="support@hostco.example")
    site = SiteFactory(name="fra1", provider=provider, region_code="eu-central", country="DE")
    pool = PoolFactory(name="hosted-h100", provider=provider, site=site,
                       delivery_form=DeliveryForm.BARE_METAL_HOSTED)
    node = healthy_node(pool=pool, provider=provider, site=site, delivery_form=DeliveryForm.BARE_METAL_HOSTED,
                        instance_id="srv-4711", instance_type="HGX H100 8-GPU", at=now)
    for gpu in GPU.objects.filter(node=node):
        gpu.serial = f"165012{gpu.index:07d}"
        gpu.save(update_fields=["serial"])
    return node


def raise_xid_79(node, *, now=None, index: int = 3):
    """An Xid 79 on one GPU, evaluated: returns the open finding."""
    from fleet.health.models import Rule
    from fleet.telemetry.models import GPUStatus, NodeStatus

    now = now or timezone.now()
    Rule.objects.filter(slug="xid").update(enabled=True)
    NodeStatus.objects.filter(node=node).update(received_at=now, collected_at=now)
    GPUStatus.objects.filter(node=node).update(collected_at=now)
    gpu = GPU.objects.get(node=node, index=index)
    EventFactory(node=node, gpu=gpu, kind="xid", code=79, at=now - timedelta(seconds=2), raw=XID_79,
                 pci_bus_id=gpu.pci_bus_id)
    evaluate(now=now)
    from fleet.health.models import Finding

    return Finding.objects.get(node=node, rule__slug="xid", state="open")


def resolve_xid(node, *, now):
    """The Xid finding resolves (the rule is switched off, which resolves at once): returns it."""
    from fleet.health.models import Finding, Rule

    Rule.objects.filter(slug="xid").update(enabled=False)
    evaluate(now=now)
    return Finding.objects.filter(node=node, rule__slug="xid", state="resolved").order_by("-id").first()
