"""Agent enrolment, latest status, history, events and the per-node change log."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from fleet.core.db import ContentKey
from fleet.inventory.choices import BillingMode, DeliveryForm
from fleet.inventory.models import GPU, Node, Pool, Provider, Site

from .choices import EventKind, EventSeverity, NvmlStatus


class EnrollmentToken(models.Model):
    """A secret an operator hands to the install script; swapped for a per-node credential at enrolment."""

    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, db_index=True)
    key_hash = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    expires_at = models.DateTimeField(null=True, blank=True)
    max_uses = models.PositiveIntegerField(null=True, blank=True, help_text="Blank = unlimited")
    uses = models.PositiveIntegerField(default=0)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Defaults applied to nodes enrolled with this token.
    provider = models.ForeignKey(Provider, on_delete=models.PROTECT, related_name="+")
    site = models.ForeignKey(Site, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    delivery_form = models.CharField(max_length=24, choices=DeliveryForm.choices)
    billing_mode = models.CharField(max_length=16, choices=BillingMode.choices, default=BillingMode.ON_DEMAND)
    labels = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_usable(self) -> bool:
        if self.revoked_at is not None:
            return False
        if self.expires_at is not None and self.expires_at <= timezone.now():
            return False
        return self.max_uses is None or self.uses < self.max_uses


class NodeCredential(models.Model):
    """The per-node secret an agent authenticates with. Only the hash is stored."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="credentials")
    prefix = models.CharField(max_length=12)
    key_hash = models.CharField(max_length=64, unique=True)
    enrolled_with = models.ForeignKey(EnrollmentToken, on_delete=models.SET_NULL, null=True, blank=True,
                                      related_name="credentials")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.node} ({self.prefix}…)"


class ReenrollmentApproval(models.Model):
    """An operator's permission for a known machine to enrol again without its current credential.

    Needed when a node lost its credential (a new disk, a re-imaged host): a machine id is not a secret, so
    without this (or the current credential) an enrolment token could take over any node. Used once, and only
    until it expires.
    """

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="reenrollment_approvals")
    approved_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                    related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["node", "expires_at"])]

    def __str__(self) -> str:
        return f"re-enrolment of {self.node_id} until {self.expires_at:%Y-%m-%d %H:%M}"

    @property
    def is_open(self) -> bool:
        return self.used_at is None and self.cancelled_at is None and self.expires_at > timezone.now()


class AgentEpoch(models.Model):
    """Highest stored sequence per agent instance: a reinstalled agent starts a new epoch, not a replay."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="agent_epochs")
    instance_id = models.CharField(max_length=64)
    last_sequence = models.BigIntegerField(default=-1)
    # Sequences at or below last_sequence that were never stored: [first, last] ranges the epoch jumped over
    # (a batch written in the request overtook reports still in the ingest queue, or the agent skipped some).
    # A report arriving later inside a gap is stored once and taken out of it; see services/ingest.py.
    gaps = models.JSONField(default=list, blank=True)
    first_seen = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node", "instance_id"], name="epoch_unique_instance")]


class NodeStatus(models.Model):
    """The latest report's node-level facts, one row per node, overwritten on every report."""

    node = models.OneToOneField(Node, on_delete=models.CASCADE, primary_key=True, related_name="status")
    # Not indexed: it changes on every report, and an indexed column that changes makes every status update a
    # non-HOT update (new index entries in every index). The silence sweep scans the table instead.
    received_at = models.DateTimeField()
    collected_at = models.DateTimeField()
    sequence = models.BigIntegerField()
    agent_instance_id = models.CharField(max_length=64)
    agent_version = models.CharField(max_length=32, blank=True)
    interval_s = models.PositiveIntegerField(default=15)
    silent = models.BooleanField(default=False, db_index=True)
    silent_since = models.DateTimeField(null=True, blank=True)
    nvml_status = models.CharField(max_length=24, choices=NvmlStatus.choices, default=NvmlStatus.OK)
    nvml_message = models.CharField(max_length=500, blank=True)
    gpu_count_seen = models.PositiveSmallIntegerField(null=True, blank=True)
    lost_gpus = models.JSONField(default=list, blank=True)
    cpu_busy_pct = models.FloatField(null=True, blank=True)
    cpu_steal_pct = models.FloatField(null=True, blank=True)
    cpu_iowait_pct = models.FloatField(null=True, blank=True)
    mem_total_bytes = models.BigIntegerField(null=True, blank=True)
    mem_available_bytes = models.BigIntegerField(null=True, blank=True)
    load1 = models.FloatField(null=True, blank=True)
    disk_await_ms_max = models.FloatField(null=True, blank=True)
    disk_util_pct_max = models.FloatField(null=True, blank=True)
    tcp_retrans_pct = models.FloatField(null=True, blank=True)
    system = models.JSONField(default=dict, blank=True, help_text="The report's full `system` section")
    cloud = models.JSONField(default=dict, blank=True, help_text="The report's `cloud` section")
    notice_kind = models.CharField(max_length=24, blank=True)
    notice_deadline = models.DateTimeField(null=True, blank=True)
    checkpoint_age_s = models.FloatField(null=True, blank=True)
    checkpoint = models.JSONField(default=dict, blank=True)
    fabric = models.JSONField(default=dict, blank=True,
                              help_text="What the fabric rules judge: GPU settings, NVLink, PCI view, NVSwitch "
                                        "services, InfiniBand ports (telemetry.services.fabric)")
    # Computed by the database from `fabric` itself, so no write path can leave it stale: nodes of one hardware
    # build share a digest, and the health cycle reads each distinct digest once (health/services/facts.py).
    fabric_key = models.GeneratedField(expression=ContentKey("fabric"), output_field=models.CharField(max_length=64),
                                       db_persist=True, null=True)
    inventory_hash = models.CharField(max_length=64, blank=True)
    boot_id = models.CharField(max_length=64, blank=True, help_text="From the last inventory; a change is a reboot")

    class Meta:
        verbose_name_plural = "node statuses"

    def __str__(self) -> str:
        return f"status of {self.node_id}"


class GPUStatus(models.Model):
    """The latest reading of one GPU."""

    gpu = models.OneToOneField(GPU, on_delete=models.CASCADE, primary_key=True, related_name="status")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpu_statuses")
    collected_at = models.DateTimeField()
    lost = models.BooleanField(default=False)
    utilization_gpu_pct = models.FloatField(null=True, blank=True)
    utilization_memory_pct = models.FloatField(null=True, blank=True)
    memory_used_bytes = models.BigIntegerField(null=True, blank=True)
    memory_total_bytes = models.BigIntegerField(null=True, blank=True)
    temperature_c = models.FloatField(null=True, blank=True)
    power_draw_w = models.FloatField(null=True, blank=True)
    power_limit_w = models.FloatField(null=True, blank=True)
    sm_clock_mhz = models.IntegerField(null=True, blank=True)
    clock_event_reasons_mask = models.BigIntegerField(null=True, blank=True)
    clock_event_reasons = models.JSONField(default=list, blank=True)
    ecc_volatile_corrected = models.BigIntegerField(null=True, blank=True)
    ecc_volatile_uncorrected = models.BigIntegerField(null=True, blank=True)
    ecc_aggregate_corrected = models.BigIntegerField(null=True, blank=True)
    ecc_aggregate_uncorrected = models.BigIntegerField(null=True, blank=True)
    # 64-bit like every count in the report schema: the server stores whatever a valid report carries.
    retired_pages_count = models.BigIntegerField(null=True, blank=True)
    retired_pages_pending = models.BooleanField(null=True, blank=True)
    remapped_rows_correctable = models.BigIntegerField(null=True, blank=True)
    remapped_rows_uncorrectable = models.BigIntegerField(null=True, blank=True)
    remapped_rows_pending = models.BooleanField(null=True, blank=True)
    remapped_rows_failure = models.BooleanField(null=True, blank=True)
    pcie_gen_current = models.SmallIntegerField(null=True, blank=True)
    pcie_gen_max = models.SmallIntegerField(null=True, blank=True)
    pcie_width_current = models.SmallIntegerField(null=True, blank=True)
    pcie_width_max = models.SmallIntegerField(null=True, blank=True)
    process_count = models.SmallIntegerField(default=0)
    process_memory_bytes = models.BigIntegerField(default=0)
    processes = models.JSONField(default=list, blank=True)
    nvlink = models.JSONField(default=list, blank=True)

    class Meta:
        verbose_name = "GPU status"
        verbose_name_plural = "GPU statuses"

    def __str__(self) -> str:
        return f"status of GPU {self.gpu_id}"


# History is kept at TELEMETRY_HISTORY_RESOLUTION_S (default one row per minute per node and per GPU), not one
# row per report: each report is folded into its time bucket (an upsert keeping the running mean, min and max;
# `services/history.py`). The primary key is (owner, bucket start), which is also what PostgreSQL partitions the
# tables by day on (`services/partitions.py`); SQLite keeps plain tables. The foreign keys carry no database
# constraint (the ORM still cascades deletes): each constraint check locks the parent row, and a partitioned
# table's foreign keys would have to be created on every partition. See docs/telemetry.md.
def _gauge(integer: bool = False):
    field = models.BigIntegerField if integer else models.FloatField
    return field(null=True), field(null=True), field(null=True)


class NodeSample(models.Model):
    """Node history: one row per node per history bucket (mean, min and max of the reports inside it)."""

    pk = models.CompositePrimaryKey("node", "at")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False)
    at = models.DateTimeField(help_text="Start of the history bucket")
    samples = models.PositiveIntegerField(default=1, help_text="Reports folded into this row")
    cpu_busy_pct, cpu_busy_pct_min, cpu_busy_pct_max = _gauge()
    cpu_steal_pct, cpu_steal_pct_min, cpu_steal_pct_max = _gauge()
    cpu_iowait_pct, cpu_iowait_pct_min, cpu_iowait_pct_max = _gauge()
    mem_used_pct, mem_used_pct_min, mem_used_pct_max = _gauge()
    load1, load1_min, load1_max = _gauge()
    tcp_retrans_pct, tcp_retrans_pct_min, tcp_retrans_pct_max = _gauge()
    gpu_util_avg_pct, gpu_util_avg_pct_min, gpu_util_avg_pct_max = _gauge()


class GPUSample(models.Model):
    """Per-GPU history: one row per GPU per history bucket."""

    pk = models.CompositePrimaryKey("gpu", "at")
    gpu = models.ForeignKey(GPU, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False)
    at = models.DateTimeField(help_text="Start of the history bucket")
    samples = models.PositiveIntegerField(default=1, help_text="Reports folded into this row")
    utilization_gpu_pct, utilization_gpu_pct_min, utilization_gpu_pct_max = _gauge()
    memory_used_bytes, memory_used_bytes_min, memory_used_bytes_max = _gauge(integer=True)
    temperature_c, temperature_c_min, temperature_c_max = _gauge()
    power_draw_w, power_draw_w_min, power_draw_w_max = _gauge()
    sm_clock_mhz, sm_clock_mhz_min, sm_clock_mhz_max = _gauge(integer=True)
    ecc_volatile_uncorrected = models.BigIntegerField(null=True, help_text="Highest count in the bucket")
    clock_event_reasons_mask = models.BigIntegerField(null=True, help_text="Every reason seen in the bucket (OR)")


# The rollups are laid out like the raw history: primary key (owner, bucket), which PostgreSQL partitions by day
# on `bucket` (`services/partitions.py`, with a default partition for rows of a day without one), no foreign-key
# constraint; retention drops whole day partitions.
class NodeSampleRollup(models.Model):
    """5-minute aggregates of node history, kept for the long retention window."""

    pk = models.CompositePrimaryKey("node", "bucket")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False)
    bucket = models.DateTimeField()
    samples = models.PositiveIntegerField()
    cpu_busy_pct = models.FloatField(null=True)
    cpu_steal_pct = models.FloatField(null=True)
    cpu_iowait_pct = models.FloatField(null=True)
    mem_used_pct = models.FloatField(null=True)
    load1 = models.FloatField(null=True)
    tcp_retrans_pct = models.FloatField(null=True)
    gpu_util_avg_pct = models.FloatField(null=True)


class GPUSampleRollup(models.Model):
    pk = models.CompositePrimaryKey("gpu", "bucket")
    gpu = models.ForeignKey(GPU, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False)
    bucket = models.DateTimeField()
    samples = models.PositiveIntegerField()
    utilization_gpu_pct = models.FloatField(null=True)
    utilization_gpu_pct_max = models.FloatField(null=True)
    memory_used_bytes = models.BigIntegerField(null=True)
    temperature_c = models.FloatField(null=True)
    temperature_c_max = models.FloatField(null=True)
    power_draw_w = models.FloatField(null=True)
    sm_clock_mhz = models.IntegerField(null=True)
    ecc_volatile_uncorrected = models.BigIntegerField(null=True)


class Event(models.Model):
    """Something that happened on a node: Xid, SXid, AER, GPU lost, preemption notice, agent error."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="events")
    gpu = models.ForeignKey(GPU, on_delete=models.SET_NULL, null=True, blank=True, related_name="events")
    kind = models.CharField(max_length=24, choices=EventKind.choices)
    code = models.IntegerField(null=True, blank=True, help_text="Xid / SXid number")
    severity = models.CharField(max_length=16, choices=EventSeverity.choices, default=EventSeverity.INFO)
    at = models.DateTimeField(help_text="When it happened on the node")
    received_at = models.DateTimeField(auto_now_add=True)
    pci_bus_id = models.CharField(max_length=64, blank=True)
    message = models.CharField(max_length=1000, blank=True)
    raw = models.TextField(blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["node", "at"]),
            models.Index(fields=["kind", "code", "at"]),
            models.Index(fields=["received_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.code or ''} on {self.node_id}"


class ChangeLogEntry(models.Model):
    """One inventory or stack change on a node: driver 550→560, GPU count 8→7, a serial replaced."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="changes")
    at = models.DateTimeField(db_index=True)
    field = models.CharField(max_length=100)
    old = models.JSONField(null=True, blank=True)
    new = models.JSONField(null=True, blank=True)
    summary = models.CharField(max_length=300)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["node", "at"])]

    def __str__(self) -> str:
        return self.summary


class ReceivingState(models.Model):
    """The silence sweep's view of the server's own receiving (one row): when it last swept, the newest report it
    had seen, and the latest gap in receiving — a time in which no node's report arrived although at least three
    nodes were due — so that silence the server caused is not blamed on the nodes (`services/silence.py`)."""

    swept_at = models.DateTimeField(null=True, blank=True)
    newest_report_at = models.DateTimeField(null=True, blank=True)
    gap_started_at = models.DateTimeField(null=True, blank=True, help_text="The last report before the gap")
    gap_ended_at = models.DateTimeField(null=True, blank=True,
                                        help_text="The first report after it; empty while the gap lasts")

    def __str__(self) -> str:
        return "receiving state"
