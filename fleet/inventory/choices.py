from django.db import models

from fleet_agent import protocol


class ProviderKind(models.TextChoices):
    CLOUD = "cloud", "Cloud"
    IDC = "idc", "IDC / hosting"
    OWN = "own", "Own datacenter"


class CloudKind(models.TextChoices):
    AWS = "aws", "AWS"
    GCP = "gcp", "Google Cloud"
    AZURE = "azure", "Azure"
    ALIBABA = "alibaba", "Alibaba Cloud"
    TENCENT = "tencent", "Tencent Cloud"
    ORACLE = "oracle", "Oracle Cloud"
    OTHER = "other", "Other"


class DeliveryForm(models.TextChoices):
    CLOUD_SHARED = "cloud_shared", "Cloud, shared / fractional GPU"
    CLOUD_DEDICATED = "cloud_dedicated", "Cloud, dedicated GPU"
    BARE_METAL_HOSTED = "bare_metal_hosted", "Bare metal, provider-hosted"
    BARE_METAL_OWNED = "bare_metal_owned", "Bare metal, our own"


# Delivery forms in which a cloud runs the machine (its hardware, its hypervisor, its metadata service).
CLOUD_FORMS = frozenset({DeliveryForm.CLOUD_SHARED, DeliveryForm.CLOUD_DEDICATED})


class BillingMode(models.TextChoices):
    ON_DEMAND = "on_demand", "On-demand"
    RESERVED = "reserved", "Reserved / subscription"
    SPOT = "spot", "Spot / preemptible"


class MigMode(models.TextChoices):
    """A baseline's MIG pin (blank: not pinned)."""

    ENABLED = "enabled", "Enabled"
    DISABLED = "disabled", "Disabled"


class NodeState(models.TextChoices):
    ENROLLING = "enrolling", "Enrolling"
    ACTIVE = "active", "Active"
    CORDONED = "cordoned", "Cordoned"
    DRAINING = "draining", "Draining"
    PREEMPTED = "preempted", "Preempted"
    REPLACING = "replacing", "Replacing"
    RETIRED = "retired", "Retired"


class Layer(models.TextChoices):
    """Responsibility layers, bottom to top (docs/concepts.md)."""

    FACILITY = "facility", "Facility"
    HARDWARE = "hardware", "Hardware"
    VIRTUALIZATION = "virtualization", "Virtualization"
    HOST_OS = "host_os", "Host OS"
    GPU_DRIVER = "gpu_driver", "GPU driver"
    CUDA_RUNTIME = "cuda_runtime", "CUDA runtime"
    FRAMEWORK = "framework", "Framework"
    APPLICATION = "application", "Application"


class Owner(models.TextChoices):
    PROVIDER = "provider", "Provider"
    US = "us", "Us"
    HARDWARE_VENDOR = "hardware_vendor", "Us + hardware vendor"
    SHARED = "shared", "Shared"
    NOT_APPLICABLE = "not_applicable", "Not applicable"


class BoundarySource(models.TextChoices):
    DEFAULT = "default", "Default matrix"
    PROVIDER = "provider", "Provider contract"
    NODE = "node", "Node override"


# The columns of SoftwareStack, one per stack field of the agent protocol and in its order (the protocol's `python`
# is `python_version` here); list-valued ones are JSON columns.
STACK_COLUMNS: dict[str, str] = {field: "python_version" if field == "python" else field
                                 for field in protocol.STACK_FIELDS}
STACK_FIELDS: tuple[str, ...] = tuple(STACK_COLUMNS.values())
STACK_LIST_FIELDS: frozenset[str] = frozenset(STACK_COLUMNS[field] for field in protocol.STACK_LIST_FIELDS)
# What a Baseline pins of a stack: everything but the Python version.
BASELINE_STACK_FIELDS: tuple[str, ...] = tuple(field for field in STACK_FIELDS if field != "python_version")
# How the change log names each field.
STACK_FIELD_LABELS: dict[str, str] = {
    "driver_version": "driver", "cuda_driver_version": "CUDA (driver max)", "cuda_toolkits": "CUDA toolkits",
    "python_version": "Python", "frameworks": "frameworks", "container_runtime": "container runtime",
    "nvidia_container_toolkit": "NVIDIA container toolkit", "os": "OS", "kernel": "kernel",
}
