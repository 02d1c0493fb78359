import factory

from fleet.accounts.choices import Role
from fleet.accounts.models import User
from fleet.inventory.choices import BillingMode, DeliveryForm, NodeState, ProviderKind
from fleet.inventory.models import GPU, Baseline, Node, Pool, Provider, Site, SoftwareStack


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    role = Role.VIEWER
    password = factory.django.Password("pw-for-tests-123")


class ProviderFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Provider

    name = factory.Sequence(lambda n: f"Provider {n}")
    slug = factory.Sequence(lambda n: f"provider-{n}")
    kind = ProviderKind.CLOUD
    cloud = "aws"


class SiteFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Site

    name = factory.Sequence(lambda n: f"site-{n}")
    provider = factory.SubFactory(ProviderFactory)
    country = "US"


class PoolFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Pool

    name = factory.Sequence(lambda n: f"pool-{n}")
    provider = factory.SubFactory(ProviderFactory)
    delivery_form = DeliveryForm.CLOUD_DEDICATED
    billing_mode = BillingMode.ON_DEMAND
    gpu_model = "NVIDIA H100 80GB HBM3"
    gpus_per_node = 8


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Node

    hostname = factory.Sequence(lambda n: f"gpu-{n:04d}")
    provider = factory.SubFactory(ProviderFactory)
    delivery_form = DeliveryForm.CLOUD_DEDICATED
    billing_mode = BillingMode.ON_DEMAND
    expected_gpu_count = 8
    expected_gpu_model = "NVIDIA H100 80GB HBM3"
    state = NodeState.ACTIVE
    machine_id = factory.Sequence(lambda n: f"{n:032x}")


class GPUFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = GPU

    node = factory.SubFactory(NodeFactory)
    index = factory.Sequence(lambda n: n % 8)
    uuid = factory.Sequence(lambda n: f"GPU-{n:08x}-0000-0000-0000-000000000000")
    model = "NVIDIA H100 80GB HBM3"
    memory_total_bytes = 85520809984
    pci_bus_id = factory.Sequence(lambda n: f"00000000:{n % 256:02x}:00.0")
    compute_capability = "9.0"


class SoftwareStackFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SoftwareStack

    node = factory.SubFactory(NodeFactory)
    collected_at = factory.Faker("date_time_this_month", tzinfo=__import__("datetime").UTC)
    driver_version = "550.54.15"
    cuda_driver_version = "12.4"
    cuda_toolkits = ["12.4"]
    frameworks = [{"name": "torch", "version": "2.4.0", "cuda": "12.4", "arch_list": ["sm_80", "sm_90"]}]
    os = "Ubuntu 22.04.4 LTS"
    kernel = "5.15.0-105-generic"


class BaselineFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Baseline

    name = factory.Sequence(lambda n: f"baseline-{n}")
    driver_version = "550.54.15"
    cuda_driver_version = "12.4"
