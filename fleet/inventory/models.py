from functools import lru_cache

from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from fleet_agent.protocol import normalize_pci_bus_id

from .choices import BillingMode, CloudKind, DeliveryForm, Layer, MigMode, NodeState, Owner, ProviderKind


class Provider(models.Model):
    """Who delivers nodes: a cloud, an IDC hosting company, or our own datacenter."""

    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=50, unique=True)
    kind = models.CharField(max_length=8, choices=ProviderKind.choices)
    cloud = models.CharField(max_length=16, choices=CloudKind.choices, blank=True,
                             help_text="Which cloud's metadata and ticketing conventions apply (clouds only).")
    support_contact = models.CharField(max_length=200, blank=True)
    notes = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Site(models.Model):
    """A region, zone or datacenter."""

    name = models.CharField(max_length=100)
    provider = models.ForeignKey(Provider, on_delete=models.PROTECT, related_name="sites", null=True, blank=True)
    region_code = models.CharField(max_length=64, blank=True, help_text="e.g. us-east-1, cn-hangzhou")
    country = models.CharField(max_length=2, help_text="ISO 3166-1 alpha-2; CN means mainland China")
    icp_filing_required = models.BooleanField(default=False,
                                              help_text="Public services here need an ICP filing (mainland China).")
    support_contact = models.CharField(
        max_length=200, blank=True,
        help_text="Whom to call about this site (e.g. the data centre's remote hands); blank: the provider's contact.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["provider", "name"], name="site_unique_per_provider")]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs):
        self.country = self.country.upper()
        if self.country == "CN":
            self.icp_filing_required = True
        super().save(*args, **kwargs)


class Pool(models.Model):
    """A group of like nodes: one instance type or server model, one way of delivery."""

    name = models.CharField(max_length=100, unique=True)
    provider = models.ForeignKey(Provider, on_delete=models.PROTECT, related_name="pools", null=True, blank=True)
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="pools", null=True, blank=True)
    delivery_form = models.CharField(max_length=24, choices=DeliveryForm.choices, blank=True)
    billing_mode = models.CharField(max_length=16, choices=BillingMode.choices, blank=True)
    instance_type = models.CharField(max_length=64, blank=True, help_text="Cloud instance type or server model")
    gpu_model = models.CharField(max_length=100, blank=True)
    gpus_per_node = models.PositiveSmallIntegerField(null=True, blank=True)
    max_concurrent_replacements = models.PositiveSmallIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Node(models.Model):
    hostname = models.CharField(max_length=253, db_index=True)
    provider = models.ForeignKey(Provider, on_delete=models.PROTECT, related_name="nodes")
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="nodes", null=True, blank=True)
    pool = models.ForeignKey(Pool, on_delete=models.SET_NULL, related_name="nodes", null=True, blank=True)
    delivery_form = models.CharField(max_length=24, choices=DeliveryForm.choices)
    billing_mode = models.CharField(max_length=16, choices=BillingMode.choices, default=BillingMode.ON_DEMAND)
    expected_gpu_count = models.PositiveSmallIntegerField(default=0)
    expected_gpu_model = models.CharField(max_length=100, blank=True)
    state = models.CharField(max_length=16, choices=NodeState.choices, default=NodeState.ENROLLING, db_index=True)
    labels = models.JSONField(default=dict, blank=True)
    public_endpoint = models.BooleanField(default=False, help_text="Serves traffic from the internet.")
    machine_id = models.CharField(max_length=64, null=True, blank=True, unique=True)
    instance_id = models.CharField(max_length=100, blank=True)
    instance_type = models.CharField(max_length=64, blank=True)
    current_stack = models.ForeignKey("SoftwareStack", on_delete=models.SET_NULL, null=True, blank=True,
                                      related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["hostname", "id"]
        indexes = [
            models.Index(fields=["provider", "state"]),
            models.Index(fields=["pool", "state"]),
        ]

    def __str__(self) -> str:
        return self.hostname


@lru_cache(maxsize=65536)
def _bus_id_key(value: str | None) -> str:
    text = (value or "").strip().lower().removeprefix("pci:")
    canonical = normalize_pci_bus_id(text)
    if canonical is None:
        return text
    domain, rest = canonical.split(":", 1)
    return f"{int(domain, 16):04x}:{rest.lower()}"


class GPU(models.Model):
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField()
    # Lengths follow the agent's report schema (fleet_agent/schema), so any valid report fits.
    uuid = models.CharField(max_length=96, unique=True)
    model = models.CharField(max_length=256, blank=True)
    memory_total_bytes = models.BigIntegerField(null=True, blank=True, validators=[MinValueValidator(0)])
    serial = models.CharField(max_length=64, blank=True)
    pci_bus_id = models.CharField(max_length=64, blank=True)
    compute_capability = models.CharField(max_length=8, blank=True)
    # The board's temperature limits in °C as NVML reports them (nvmlDeviceGetTemperatureThreshold); null where
    # the board has none or the agent predates them.
    temperature_slowdown_c = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Hardware slowdown (clocks cut) begins at this GPU temperature, °C.")
    temperature_shutdown_c = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="The GPU shuts down for protection at this temperature, °C.")
    temperature_max_operating_c = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Maximum operating temperature (software throttling begins), °C.")
    present = models.BooleanField(default=True, help_text="False once the GPU stopped appearing in inventory.")
    first_seen = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["node_id", "index"]
        verbose_name = "GPU"

    def __str__(self) -> str:
        return f"{self.node.hostname}#{self.index}"

    # PCI addresses come in several spellings (NVML's `00000000:91:00.0`, the kernel log's `PCI:0000:91:00`,
    # a bare `91:00.0`); this is the one key they are compared by, and the form finding subjects use
    # (`pci:0000:91:00.0`). A text that is no PCI address is kept, lowercased.
    normalize_bus_id = staticmethod(_bus_id_key)


class SoftwareStack(models.Model):
    """A node's software stack as reported at one moment; a new row only when the stack changes."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="stacks")
    collected_at = models.DateTimeField(db_index=True)
    hash = models.CharField(max_length=64, blank=True)
    # Lengths follow the agent's report schema (fleet_agent/schema), so any valid report fits.
    driver_version = models.CharField(max_length=64, blank=True)
    cuda_driver_version = models.CharField(max_length=16, blank=True, help_text="Highest CUDA the driver supports")
    cuda_toolkits = models.JSONField(default=list, blank=True)
    python_version = models.CharField(max_length=64, blank=True)
    frameworks = models.JSONField(
        default=list, blank=True,
        help_text='[{"name": "torch", "version": "2.4.0", "cuda": "12.4", "arch_list": [...]}]')
    container_runtime = models.CharField(max_length=128, blank=True)
    nvidia_container_toolkit = models.CharField(max_length=64, blank=True)
    os = models.CharField(max_length=256, blank=True)
    kernel = models.CharField(max_length=256, blank=True)

    class Meta:
        ordering = ["-collected_at", "-id"]

    def __str__(self) -> str:
        return f"{self.node.hostname} @ {self.collected_at:%Y-%m-%d %H:%M}"


class Baseline(models.Model):
    """The pinned stack for a pool (or one node). Blank fields are not pinned."""

    name = models.CharField(max_length=100)
    pool = models.OneToOneField(Pool, on_delete=models.CASCADE, null=True, blank=True, related_name="baseline")
    node = models.OneToOneField(Node, on_delete=models.CASCADE, null=True, blank=True, related_name="baseline")
    driver_version = models.CharField(max_length=32, blank=True)
    cuda_driver_version = models.CharField(max_length=16, blank=True)
    cuda_toolkits = models.JSONField(default=list, blank=True)
    frameworks = models.JSONField(default=list, blank=True,
                                  help_text='[{"name": "torch", "version": "2.4.0", "cuda": "12.4"}]')
    container_runtime = models.CharField(max_length=64, blank=True)
    nvidia_container_toolkit = models.CharField(max_length=32, blank=True)
    os = models.CharField(max_length=100, blank=True)
    kernel = models.CharField(max_length=100, blank=True)
    gpu_model = models.CharField(max_length=100, blank=True)
    gpu_memory_bytes = models.BigIntegerField(null=True, blank=True)
    gpu_count = models.PositiveSmallIntegerField(null=True, blank=True)
    # The fabric rules' pins (fleet.health.rules.fabric): blank / null = not pinned.
    mig_mode = models.CharField(max_length=8, choices=MigMode.choices, blank=True,
                                help_text="MIG mode every GPU must be in; blank: not pinned")
    gsp_firmware_version = models.CharField(max_length=64, blank=True,
                                            help_text="GSP firmware every GPU must run; blank: all GPUs alike")
    ib_port_count = models.PositiveSmallIntegerField(null=True, blank=True,
                                                     help_text="InfiniBand / RoCE ports that must be active")
    ib_rate_gbps = models.PositiveIntegerField(null=True, blank=True,
                                               help_text="Rate every active port must run at (Gb/s); blank: the "
                                                         "fastest port of the node")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(pool__isnull=False) & Q(node__isnull=True))
                | (Q(pool__isnull=True) & Q(node__isnull=False)),
                name="baseline_pool_xor_node",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class BoundaryOverride(models.Model):
    """One cell of the responsibility matrix changed by a provider contract or for a single node."""

    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, null=True, blank=True,
                                 related_name="boundary_overrides")
    delivery_form = models.CharField(max_length=24, choices=DeliveryForm.choices, blank=True,
                                     help_text="Provider overrides only: limit to one delivery form (blank = all).")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, null=True, blank=True, related_name="boundary_overrides")
    layer = models.CharField(max_length=16, choices=Layer.choices)
    owner = models.CharField(max_length=16, choices=Owner.choices)
    note = models.CharField(max_length=200, blank=True, help_text="Why, e.g. the contract clause")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(provider__isnull=False) & Q(node__isnull=True))
                | (Q(provider__isnull=True) & Q(node__isnull=False) & Q(delivery_form="")),
                name="override_provider_xor_node",
            ),
            models.UniqueConstraint(fields=["provider", "delivery_form", "layer"], condition=Q(node__isnull=True),
                                    name="override_unique_provider_cell"),
            models.UniqueConstraint(fields=["node", "layer"], condition=Q(provider__isnull=True),
                                    name="override_unique_node_cell"),
        ]

    def __str__(self) -> str:
        scope = self.node or self.provider
        return f"{scope}: {self.layer} → {self.owner}"
