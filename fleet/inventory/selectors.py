"""Read-side queries for inventory: effective boundary, baselines and drift."""

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from django.db.models import (
    Case,
    CharField,
    Count,
    DateTimeField,
    Exists,
    F,
    IntegerField,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Coalesce, NullIf

from .boundary import DEFAULT_MATRIX, LAYER_ORDER
from .choices import BASELINE_STACK_FIELDS, STACK_LIST_FIELDS, BoundarySource, Layer, Owner, ProviderKind
from .models import GPU, Baseline, BoundaryOverride, Node, Provider, SoftwareStack


@dataclass(frozen=True)
class BoundaryCell:
    layer: str
    owner: str
    source: str
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def boundary_matrices(*, nodes: Iterable[Node], own_datacenters: set[int] | None = None
                      ) -> dict[int, dict[str, BoundaryCell]]:
    """Effective matrix for many nodes: default → provider contract → node override. The default's facility
    cell is ours, not the provider's, where the provider record is our own datacenter (kind `own`): a room
    cooling or power fault goes to our facilities team, never as a provider ticket to ourselves.
    `own_datacenters`: the ids of such providers when the caller has them (else one more query)."""
    nodes = list(nodes)
    if not nodes:
        return {}
    provider_ids = {n.provider_id for n in nodes}
    if own_datacenters is None and all(Node.provider.is_cached(node) for node in nodes):
        own_datacenters = {node.provider_id for node in nodes if node.provider.kind == ProviderKind.OWN}
    elif own_datacenters is None:
        own_datacenters = set(Provider.objects.filter(pk__in=provider_ids, kind=ProviderKind.OWN)
                              .values_list("pk", flat=True))
    node_ids = {n.pk for n in nodes}
    overrides = BoundaryOverride.objects.filter(Q(provider_id__in=provider_ids) | Q(node_id__in=node_ids))
    by_provider: dict[tuple[int, str], BoundaryOverride] = {}
    by_node: dict[tuple[int, str], BoundaryOverride] = {}
    # Form-specific provider overrides are applied after provider-wide ones, so they win.
    for override in sorted(overrides, key=lambda o: (o.node_id is not None, bool(o.delivery_form))):
        if override.node_id is not None:
            by_node[(override.node_id, override.layer)] = override
        else:
            by_provider[(override.provider_id, override.delivery_form, override.layer)] = override

    result: dict[int, dict[str, BoundaryCell]] = {}
    for node in nodes:
        cells: dict[str, BoundaryCell] = {}
        for layer in LAYER_ORDER:
            cell = BoundaryCell(layer, DEFAULT_MATRIX[layer][node.delivery_form], BoundarySource.DEFAULT)
            if layer == Layer.FACILITY and cell.owner == Owner.PROVIDER and node.provider_id in own_datacenters:
                cell = BoundaryCell(layer, Owner.US, BoundarySource.DEFAULT,
                                    "our own datacenter: the facilities team")
            for form in ("", node.delivery_form):
                override = by_provider.get((node.provider_id, form, layer))
                if override is not None:
                    cell = BoundaryCell(layer, override.owner, BoundarySource.PROVIDER, override.note)
            override = by_node.get((node.pk, layer))
            if override is not None:
                cell = BoundaryCell(layer, override.owner, BoundarySource.NODE, override.note)
            cells[layer] = cell
        result[node.pk] = cells
    return result


def node_boundary(*, node: Node) -> list[BoundaryCell]:
    """A node's matrix from the top layer (application) down to the facility, as the console draws it."""
    cells = boundary_matrices(nodes=[node])[node.pk]
    return [cells[layer] for layer in reversed(LAYER_ORDER)]


# Above this many nodes the baseline query reads every node's own baseline rather than naming the nodes: node
# baselines are exceptions, so that is a few rows, where an IN list of a whole fleet's ids is a long query.
_NODE_ID_LIST_LIMIT = 500


def node_baselines(*, nodes: Iterable[tuple[int, int | None]], fields: Sequence[str] | None = None
                   ) -> dict[int, Baseline | dict]:
    """The baseline each node is judged against: its own if it has one, else its pool's. One query.

    `nodes` are (node id, pool id) pairs; nodes without a baseline are absent from the result. With `fields`
    the baselines are plain dicts of those fields (the health engine's bulk path), else model instances.
    """
    pairs = list(nodes)
    if not pairs:
        return {}
    node_ids = {node_id for node_id, _ in pairs}
    pool_ids = {pool_id for _, pool_id in pairs if pool_id is not None}
    own = Q(node__isnull=False) if len(node_ids) > _NODE_ID_LIST_LIMIT else Q(node_id__in=node_ids)
    baselines = Baseline.objects.order_by().filter(own | Q(pool_id__in=pool_ids))
    if fields is not None:
        baselines = baselines.values(*dict.fromkeys([*fields, "node_id", "pool_id"]))
    by_node, by_pool = {}, {}
    for baseline in baselines:
        node_id, pool_id = (baseline["node_id"], baseline["pool_id"]) if fields is not None else \
            (baseline.node_id, baseline.pool_id)
        if node_id is not None:
            by_node[node_id] = baseline
        else:
            by_pool[pool_id] = baseline
    result = {}
    for node_id, pool_id in pairs:
        baseline = by_node.get(node_id) or by_pool.get(pool_id)
        if baseline is not None:
            result[node_id] = baseline
    return result


def expected_gpu_count(*, declared: int | None, baseline: int | None, pool: int | None) -> int:
    """How many GPUs a node should have: what the node declares (enrolment or an operator), else what its
    baseline pins, else its pool's GPUs per node; 0 when nothing says. Billing and health both count by this."""
    return declared or baseline or pool or 0


def node_expected_gpu_counts(*, nodes: Iterable[Node]) -> dict[int, int]:
    """`expected_gpu_count` for each node. What is not needed is not read: baselines (one query) only for nodes
    that declare no count, a node's pool (select it with the nodes) only when its baseline pins none either."""
    counts: dict[int, int] = {}
    undeclared = []
    for node in nodes:
        if node.expected_gpu_count:
            counts[node.pk] = expected_gpu_count(declared=node.expected_gpu_count, baseline=None, pool=None)
        else:
            undeclared.append(node)
    baselines = node_baselines(nodes=[(n.pk, n.pool_id) for n in undeclared], fields=["gpu_count"])
    for node in undeclared:
        pinned = (baselines.get(node.pk) or {}).get("gpu_count")
        pool = node.pool.gpus_per_node if node.pool_id and not pinned else None
        counts[node.pk] = expected_gpu_count(declared=None, baseline=pinned, pool=pool)
    return counts


# The stack fields a baseline pins one value of; lists (toolkits, frameworks) are compared on their own.
_PINNED_SCALARS = [field for field in BASELINE_STACK_FIELDS if field not in STACK_LIST_FIELDS]


def _framework_index(frameworks) -> dict[str, dict]:
    return {str(f.get("name", "")).lower(): f for f in frameworks or [] if isinstance(f, dict)}


def stack_drift(*, stack: SoftwareStack | None, baseline: Baseline, gpus: list[GPU] | None = None) -> list[dict]:
    """Field-by-field differences between a stack and a baseline. Blank baseline fields are not pinned."""
    drift: list[dict] = []

    def add(field: str, expected, actual) -> None:
        drift.append({"field": field, "expected": expected, "actual": actual})

    for field in _PINNED_SCALARS:
        expected = getattr(baseline, field)
        if expected:
            actual = getattr(stack, field) if stack else None
            if actual != expected:
                add(field, expected, actual or None)
    if baseline.cuda_toolkits:
        actual = sorted(stack.cuda_toolkits) if stack else None
        if actual != sorted(baseline.cuda_toolkits):
            add("cuda_toolkits", sorted(baseline.cuda_toolkits), actual)
    actual_frameworks = _framework_index(stack.frameworks if stack else [])
    for name, pinned in _framework_index(baseline.frameworks).items():
        found = actual_frameworks.get(name)
        for key in ("version", "cuda"):
            if pinned.get(key) and (found or {}).get(key) != pinned[key]:
                add(f"frameworks.{name}.{key}", pinned[key], (found or {}).get(key))

    if gpus is not None:
        present = [g for g in gpus if g.present]
        if baseline.gpu_count is not None and len(present) != baseline.gpu_count:
            add("gpu_count", baseline.gpu_count, len(present))
        if baseline.gpu_model:
            for gpu in present:
                if gpu.model != baseline.gpu_model:
                    add(f"gpus[{gpu.index}].model", baseline.gpu_model, gpu.model)
        if baseline.gpu_memory_bytes:
            for gpu in present:
                if gpu.memory_total_bytes is not None and gpu.memory_total_bytes != baseline.gpu_memory_bytes:
                    add(f"gpus[{gpu.index}].memory_total_bytes", baseline.gpu_memory_bytes, gpu.memory_total_bytes)
    return drift


def node_drift(*, node: Node) -> dict:
    baseline = node_baselines(nodes=[(node.pk, node.pool_id)]).get(node.pk)
    if baseline is None:
        return {"baseline": None, "drift": [], "drifted": False}
    drift = stack_drift(stack=node.current_stack, baseline=baseline, gpus=list(node.gpus.all()))
    return {"baseline": baseline, "drift": drift, "drifted": bool(drift)}


def baseline_nodes(*, baseline: Baseline) -> QuerySet[Node]:
    if baseline.node_id:
        return Node.objects.filter(pk=baseline.node_id)
    # Nodes of the pool that have their own baseline are judged against that one instead.
    return Node.objects.filter(pool_id=baseline.pool_id, baseline__isnull=True)


def baseline_drift(*, baseline: Baseline) -> list[dict]:
    """Every node under the baseline that drifted, with its differences."""
    nodes = baseline_nodes(baseline=baseline).select_related("current_stack").prefetch_related("gpus")
    report = []
    for node in nodes:
        drift = stack_drift(stack=node.current_stack, baseline=baseline, gpus=list(node.gpus.all()))
        if drift:
            report.append({"node_id": node.pk, "hostname": node.hostname, "drift": drift})
    return report


# --- The nodes list: triage columns in one query ----------------------------------------------------------------
# Findings (health) and node status (telemetry) sit above inventory in the layers, so they are reached here
# through the reverse relations Django gives Node (`findings`, `status`) and never imported. The values below are
# the health app's own (`fleet.health.choices`: FindingState.OPEN, Severity, STEP_ORDER);
# tests/inventory/test_node_list.py checks they match.
OPEN_STATE = "open"
SEVERITY_ORDER = ["critical", "warning", "info"]
STEP_ORDER = ["visibility", "software_chain", "capacity", "platform_hardware"]
NO_FINDING_RANK = len(SEVERITY_ORDER)


def _rank(field: str, order: list[str]) -> Case:
    return Case(*(When(**{field: value}, then=Value(index)) for index, value in enumerate(order)),
                default=Value(len(order)), output_field=IntegerField())


def _open_findings():
    finding_model = Node._meta.get_field("findings").related_model
    return finding_model.objects.filter(node=OuterRef("pk"), state=OPEN_STATE).order_by()


def node_list() -> QuerySet[Node]:
    """Nodes with what the triage list shows, each a column of the same query (no query per row):

    - `severity_rank`: 0 critical, 1 warning, 2 info, 3 nothing open (the worst open finding's severity);
    - `open_findings`, `open_since` (the oldest open finding's opening time);
    - `headline_party`: who acts on the triage headline — the first failing step's most severe, oldest finding;
    - `last_report_at`, `report_interval_s`, `reporting_silent` from the latest report;
    - `gpus_seen` (in the latest report, less the GPUs it marks lost: NVML still counts a GPU that fell off
      the bus) and `gpus_expected` (declared, else baseline, else pool; as `expected_gpu_count`).
    """
    open_findings = _open_findings()
    counts = open_findings.values("node").annotate(n=Count("pk")).values("n")
    oldest = open_findings.values("node").annotate(at=Min("opened_at")).values("at")
    worst = open_findings.annotate(r=_rank("severity", SEVERITY_ORDER)).order_by("r").values("r")[:1]
    lost = (GPU.objects.filter(node=OuterRef("pk"), status__lost=True).values("node")
            .annotate(n=Count("pk")).values("n"))
    headline = (open_findings.annotate(step_rank=_rank("step", STEP_ORDER), r=_rank("severity", SEVERITY_ORDER))
                .order_by("step_rank", "r", "opened_at", "id").values("responsible_party")[:1])
    return (Node.objects.select_related("provider", "site", "pool")
            .annotate(severity_rank=Coalesce(Subquery(worst, output_field=IntegerField()), Value(NO_FINDING_RANK)),
                      open_findings=Coalesce(Subquery(counts, output_field=IntegerField()), Value(0)),
                      open_since=Subquery(oldest, output_field=DateTimeField()),
                      headline_party=Subquery(headline, output_field=CharField()),
                      last_report_at=F("status__received_at"),
                      report_interval_s=F("status__interval_s"),
                      reporting_silent=F("status__silent"),
                      gpus_seen=F("status__gpu_count_seen") - Coalesce(Subquery(lost, output_field=IntegerField()),
                                                                       Value(0)),
                      gpus_expected=Coalesce(
                          NullIf(F("expected_gpu_count"), Value(0)),
                          Case(When(baseline__isnull=False, then=F("baseline__gpu_count")),
                               default=F("pool__baseline__gpu_count")),
                          F("pool__gpus_per_node"), Value(0), output_field=IntegerField())))


def node_has_open_findings(queryset: QuerySet[Node], value: bool) -> QuerySet[Node]:
    has = Exists(_open_findings())
    return queryset.filter(has if value else ~has)


def severity_name(rank: int | None) -> str | None:
    """The severity a `severity_rank` stands for; None when nothing is open."""
    return SEVERITY_ORDER[rank] if rank is not None and rank < len(SEVERITY_ORDER) else None
