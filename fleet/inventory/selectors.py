"""Read-side queries for inventory: effective boundary, baselines and drift."""

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from django.db.models import Q, QuerySet

from .boundary import DEFAULT_MATRIX, LAYER_ORDER
from .choices import BoundarySource
from .models import GPU, Baseline, BoundaryOverride, Node, SoftwareStack


@dataclass(frozen=True)
class BoundaryCell:
    layer: str
    owner: str
    source: str
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def boundary_matrices(*, nodes: Iterable[Node]) -> dict[int, dict[str, BoundaryCell]]:
    """Effective matrix for many nodes in one query: default → provider contract → node override."""
    nodes = list(nodes)
    if not nodes:
        return {}
    provider_ids = {n.provider_id for n in nodes}
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


def node_baseline(*, node: Node) -> Baseline | None:
    """The node's own baseline if it has one, else its pool's."""
    return _baseline_lookup(node)


def _baseline_lookup(node: Node) -> Baseline | None:
    own = Baseline.objects.filter(node=node).first()
    if own is not None:
        return own
    if node.pool_id is None:
        return None
    return Baseline.objects.filter(pool_id=node.pool_id).first()


STACK_FIELDS = ["driver_version", "cuda_driver_version", "container_runtime", "nvidia_container_toolkit",
                "os", "kernel"]


def _framework_index(frameworks) -> dict[str, dict]:
    return {str(f.get("name", "")).lower(): f for f in frameworks or [] if isinstance(f, dict)}


def stack_drift(*, stack: SoftwareStack | None, baseline: Baseline, gpus: list[GPU] | None = None) -> list[dict]:
    """Field-by-field differences between a stack and a baseline. Blank baseline fields are not pinned."""
    drift: list[dict] = []

    def add(field: str, expected, actual) -> None:
        drift.append({"field": field, "expected": expected, "actual": actual})

    for field in STACK_FIELDS:
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
    baseline = _baseline_lookup(node)
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
