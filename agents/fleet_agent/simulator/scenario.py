"""Scenario files: which simulated nodes exist and which faults hit them when.

The format is documented in docs/agent.md ("Simulator scenarios"). Loading validates everything
up front and names the offending place (``nodes[1].faults[0].gpu: ...``), so a typo in a demo
file fails at start-up rather than silently simulating a healthy node.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from fleet_agent.simnvml import GPU_MODELS

PROVIDERS = ("aws", "gcp", "azure", "alibaba", "tencent", "idc", "own")
CLOUD_PROVIDERS = ("aws", "gcp", "azure", "alibaba", "tencent")
DELIVERY_FORMS = ("cloud_shared", "cloud_dedicated", "bare_metal_hosted", "bare_metal_owned")
BILLING_MODES = ("on_demand", "reserved", "spot", "subscription", "owned")
NVML_STATES = ("ok", "library_not_found", "driver_not_loaded", "no_permission")

# fault -> (parameters it accepts, whether "gpu" is required, whether "gpu": "all" is allowed)
FAULTS: dict[str, tuple[frozenset[str], bool, bool]] = {
    "xid": (frozenset({"code", "message", "repeat_s"}), True, False),
    "gpu_lost": (frozenset(), True, False),
    "gpu_missing": (frozenset(), True, False),
    "ecc_uncorrectable": (frozenset({"count", "containment"}), True, False),
    "row_remap_pending": (frozenset(), True, False),
    "row_remap_failure": (frozenset(), True, False),
    "pcie_downgrade": (frozenset({"gen", "width"}), True, True),
    "thermal_throttle": (frozenset({"temperature_c"}), False, True),
    "power_throttle": (frozenset({"brake"}), False, True),
    "memory_pressure": (frozenset({"used_pct"}), False, True),
    "residual_process": (frozenset({"memory_gb", "pid", "name"}), True, False),
    "cpu_bound_pipeline": (frozenset({"gpu_util_pct", "cpu_busy_pct"}), False, False),
    "cpu_steal": (frozenset({"steal_pct"}), False, False),
    "driver_upgraded": (frozenset({"driver_version", "cuda_driver_version"}), False, False),
    "framework_cuda_too_new": (frozenset({"cuda", "version"}), False, False),
    "arch_missing": (frozenset({"arch_list"}), False, False),
    "spot_notice": (frozenset({"kind", "lead_s", "reclaim"}), False, False),
    "checkpoint_stale": (frozenset({"age_s"}), False, False),
    "silent": (frozenset(), False, False),
    "host_memory_exhausted": (frozenset({"available_pct", "psi_some", "psi_full"}), False, False),
    "swap_storm": (frozenset({"pages_per_s"}), False, False),
    "oom_kill": (frozenset({"count", "process", "pid"}), False, False),
    "volume_full": (frozenset({"mount", "used_pct"}), False, False),
    "volume_read_only": (frozenset({"mount"}), False, False),
    "volume_hung": (frozenset({"mount"}), False, False),
    "gpu_d_state": (frozenset({"pid", "name", "wchan"}), True, False),
    "peermem_missing": (frozenset(), False, False),
    "clock_unsynced": (frozenset({"maxerror_us"}), False, False),
    # GPU configuration, NVLink, PCI, fabric services, InfiniBand (fleet.health.rules.fabric)
    "gpu_not_in_nvml": (frozenset(), True, False),
    "nvlink_down": (frozenset({"link"}), True, False),
    "nvlink_errors": (frozenset({"link", "counter", "per_s"}), True, False),
    "persistence_off": (frozenset(), False, True),
    "ecc_mode": (frozenset({"current", "pending"}), False, True),
    "mig_mode": (frozenset({"current", "pending"}), False, True),
    "gsp_drift": (frozenset({"version"}), True, True),
    "fabric_manager_down": (frozenset(), False, False),
    "imex_down": (frozenset(), False, False),
    "ib_port_down": (frozenset({"port", "phys_state"}), False, False),
    "ib_port_degraded": (frozenset({"port", "rate_gbps"}), False, False),
    "ib_errors": (frozenset({"port", "counter", "per_s"}), False, False),
}
FABRIC_FAULTS = frozenset({
    "gpu_not_in_nvml", "nvlink_down", "nvlink_errors", "persistence_off", "ecc_mode", "mig_mode", "gsp_drift",
    "fabric_manager_down", "imex_down", "ib_port_down", "ib_port_degraded", "ib_errors",
})
# A node's fabric: NVSwitches (and so a fabric manager), InfiniBand ports and their rate, IMEX. Defaults follow
# the GPU: an 8-GPU HGX board (NVLink through NVSwitches) has 4 NVSwitches; InfiniBand ports only when given.
FABRIC_KEYS = frozenset({"nvswitches", "ib_ports", "ib_rate_gbps", "imex"})
_FAULT_COMMON = frozenset({"at_s", "clear_at_s", "fault", "gpu", "note"})
_NODE_KEYS = frozenset(
    {
        "name",
        "count",
        "provider",
        "provider_name",
        "delivery_form",
        "billing_mode",
        "region",
        "instance_type",
        "gpu",
        "memory_gb",
        "cpu_count",
        "stack",
        "nvml",
        "workload",
        "checkpoint",
        "rdma_devices",
        "faults",
        "note",
        "fabric",
    }
)

_DEFAULT_INSTANCE_TYPES = {
    "aws": "p5.48xlarge",
    "gcp": "a3-highgpu-8g",
    "azure": "Standard_ND96isr_H100_v5",
    "alibaba": "ecs.gn8is.2xlarge",
    "tencent": "HCCPNV5",
    "idc": "bare-metal",
    "own": "bare-metal",
}
_DEFAULT_REGIONS = {
    "aws": "us-east-1",
    "gcp": "us-central1",
    "azure": "eastus",
    "alibaba": "cn-hangzhou",
    "tencent": "ap-shanghai",
    "idc": "dc-1",
    "own": "onprem-1",
}
DEFAULT_STACK: dict[str, Any] = {
    "driver_version": "550.54.15",
    "cuda_driver_version": "12.4",
    "cuda_toolkits": ["12.4"],
    "python": "3.11.7",
    "frameworks": [
        {
            "name": "torch",
            "version": "2.4.0+cu124",
            "cuda": "12.4",
            "arch_list": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
        }
    ],
    "container_runtime": "docker 26.1.0",
    "nvidia_container_toolkit": "1.15.0",
    "os": "Ubuntu 22.04.4 LTS",
    "kernel": "5.15.0-105-generic",
    # Running containers the agent can inspect ([{"image": ..., "cuda": "12.8"}]) and CUDA forward-compatibility
    # packages ([{"cuda": "12.8", "libcuda": "570.86.10"}]).
    "containers": [],
    "cuda_compat": [],
}
SPOT_NOTICE_KINDS = {
    "aws": ("terminate", "stop", "hibernate", "rebalance"),
    "gcp": ("preempt", "maintenance"),
    "azure": ("preempt", "terminate", "maintenance"),
    "alibaba": ("terminate",),
    "tencent": ("terminate",),
}


class ScenarioError(ValueError):
    pass


@dataclass(frozen=True)
class Fault:
    kind: str
    at_s: float
    clear_at_s: float | None = None
    gpu: int | str | None = None  # an index, "all", or None when the fault is node-wide
    params: dict = field(default_factory=dict)

    def active_at(self, t: float) -> bool:
        return self.at_s <= t and (self.clear_at_s is None or t < self.clear_at_s)

    def gpu_indices(self, gpu_count: int) -> list[int]:
        if self.gpu is None or self.gpu == "all":
            return list(range(gpu_count))
        return [int(self.gpu)]


@dataclass(frozen=True)
class NodeSpec:
    name: str
    provider: str
    delivery_form: str
    billing_mode: str
    region: str
    instance_type: str
    gpu_model: str
    gpu_count: int
    memory_gb: int
    cpu_count: int
    stack: dict
    nvml: str = "ok"
    workload: dict = field(default_factory=dict)
    checkpoint: dict | None = None
    faults: tuple[Fault, ...] = ()
    provider_name: str | None = None
    rdma_devices: int = 0  # InfiniBand / RoCE HCAs in /sys/class/infiniband (GPUDirect RDMA expected)
    fabric: dict = field(default_factory=dict)

    def fabric_layout(self) -> dict:
        """NVSwitches, InfiniBand ports, their rate and IMEX for this node (the scenario's ``fabric``, else
        defaults: an 8-GPU HGX board has 4 NVSwitches; InfiniBand ports only where the scenario gives them, since
        RDMA devices make other checks expect GPUDirect RDMA's peer-memory module)."""
        hgx = (self.gpu_count == 8 and GPU_MODELS[self.gpu_model]["nvlinks"] >= 12
               and self.delivery_form != "cloud_shared")
        layout = {"nvswitches": 4 if hgx else 0, "ib_ports": 0, "ib_rate_gbps": 400, "imex": False}
        layout.update(self.fabric)
        return layout

    @property
    def is_cloud(self) -> bool:
        return self.provider in CLOUD_PROVIDERS

    @property
    def spot(self) -> bool:
        return self.billing_mode == "spot"

    def labels(self) -> dict:
        return {
            "provider": self.provider_name or self.provider,
            "delivery_form": self.delivery_form,
            "billing_mode": self.billing_mode,
            "simulated": True,
        }


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    interval_s: float
    seed: int
    nodes: tuple[NodeSpec, ...]  # expanded: one entry per node of the scenario ("count" applied)

    def node_for(self, ordinal: int) -> NodeSpec:
        """Node ``ordinal`` of a run with any number of nodes: the scenario's list, repeated."""
        return self.nodes[ordinal % len(self.nodes)]


# -- loading -------------------------------------------------------------------------------------


def bundled_scenarios() -> list[str]:
    return sorted(
        entry.name.removesuffix(".json")
        for entry in resources.files("fleet_agent.scenarios").iterdir()
        if entry.name.endswith(".json")
    )


def load_scenario(source: str | Path | dict) -> Scenario:
    """A scenario from a dict, a JSON file path, or the name of a bundled scenario."""
    if isinstance(source, dict):
        return parse_scenario(source)
    path = Path(source)
    if path.suffix == ".json" or path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as err:
            raise ScenarioError(f"cannot read scenario {path}: {err}") from None
        except ValueError as err:
            raise ScenarioError(f"scenario {path} is not valid JSON: {err}") from None
        return parse_scenario(data, origin=str(path))
    name = str(source)
    if name not in bundled_scenarios():
        raise ScenarioError(
            f"no scenario file {name!r} and no bundled scenario of that name "
            f"(bundled: {', '.join(bundled_scenarios())})"
        )
    text = resources.files("fleet_agent.scenarios").joinpath(f"{name}.json").read_text(encoding="utf-8")
    return parse_scenario(json.loads(text), origin=f"bundled:{name}")


def parse_scenario(data: Any, origin: str = "scenario") -> Scenario:
    _expect(isinstance(data, dict), origin, "must be a JSON object")
    unknown = set(data) - {"name", "description", "interval_s", "seed", "nodes"}
    _expect(not unknown, origin, f"unknown keys {sorted(unknown)}")
    nodes_data = data.get("nodes")
    _expect(isinstance(nodes_data, list) and nodes_data, f"{origin}.nodes", "must be a non-empty list")
    nodes: list[NodeSpec] = []
    for index, node in enumerate(nodes_data):
        spec, count = _parse_node(node, f"{origin}.nodes[{index}]")
        nodes.extend([spec] * count)
    interval = _number(data.get("interval_s", 15), f"{origin}.interval_s", 1, 3600)
    return Scenario(
        name=str(data.get("name") or Path(origin).stem),
        description=str(data.get("description", "")),
        interval_s=interval,
        seed=int(_number(data.get("seed", 0), f"{origin}.seed", 0, 2**31)),
        nodes=tuple(nodes),
    )


def _parse_node(data: Any, where: str) -> tuple[NodeSpec, int]:
    _expect(isinstance(data, dict), where, "must be an object")
    unknown = set(data) - _NODE_KEYS
    _expect(not unknown, where, f"unknown keys {sorted(unknown)}")
    provider = _one_of(data.get("provider"), PROVIDERS, f"{where}.provider")
    cloud = provider in CLOUD_PROVIDERS
    default_form = (
        "cloud_dedicated" if cloud else ("bare_metal_hosted" if provider == "idc" else "bare_metal_owned")
    )
    delivery_form = _one_of(data.get("delivery_form", default_form), DELIVERY_FORMS, f"{where}.delivery_form")
    billing = _one_of(
        data.get("billing_mode", "on_demand" if cloud else "owned"), BILLING_MODES, f"{where}.billing_mode"
    )
    gpu = data.get("gpu") or {}
    _expect(
        isinstance(gpu, dict), f"{where}.gpu", 'must be an object like {"model": "H100-SXM-80GB", "count": 8}'
    )
    model = _one_of(gpu.get("model", "H100-SXM-80GB"), tuple(GPU_MODELS), f"{where}.gpu.model")
    gpu_count = int(_number(gpu.get("count", 8), f"{where}.gpu.count", 0, 64))
    stack = copy.deepcopy(DEFAULT_STACK)
    stack_data = data.get("stack", {})
    _expect(isinstance(stack_data, dict), f"{where}.stack", "must be an object")
    unknown = set(stack_data) - set(DEFAULT_STACK)
    _expect(not unknown, f"{where}.stack", f"unknown keys {sorted(unknown)}")
    stack.update(stack_data)
    checkpoint = data.get("checkpoint")
    _expect(checkpoint is None or isinstance(checkpoint, dict), f"{where}.checkpoint", "must be an object")
    spec = NodeSpec(
        name=str(data.get("name") or provider),
        provider=provider,
        delivery_form=delivery_form,
        billing_mode=billing,
        region=str(data.get("region") or _DEFAULT_REGIONS[provider]),
        instance_type=str(data.get("instance_type") or _DEFAULT_INSTANCE_TYPES[provider]),
        gpu_model=model,
        gpu_count=gpu_count,
        memory_gb=int(_number(data.get("memory_gb", 1024), f"{where}.memory_gb", 1, 65536)),
        cpu_count=int(_number(data.get("cpu_count", 96), f"{where}.cpu_count", 1, 1024)),
        stack=stack,
        nvml=_one_of(data.get("nvml", "ok"), NVML_STATES, f"{where}.nvml"),
        workload=dict(data.get("workload") or {}),
        checkpoint=checkpoint,
        faults=(),
        provider_name=data.get("provider_name"),
        rdma_devices=int(_number(data.get("rdma_devices", 0), f"{where}.rdma_devices", 0, 64)),
        fabric=_parse_fabric(data.get("fabric", {}), f"{where}.fabric"),
    )
    faults_data = data.get("faults", [])
    _expect(isinstance(faults_data, list), f"{where}.faults", "must be a list")
    faults = tuple(_parse_fault(f, f"{where}.faults[{i}]", spec) for i, f in enumerate(faults_data))
    spec = NodeSpec(**{**spec.__dict__, "faults": faults})
    count = int(_number(data.get("count", 1), f"{where}.count", 1, 10000))
    return spec, count


def _parse_fabric(data: Any, where: str) -> dict:
    _expect(isinstance(data, dict), where, 'must be an object like {"nvswitches": 4, "ib_ports": 8}')
    unknown = set(data) - FABRIC_KEYS
    _expect(not unknown, where, f"unknown keys {sorted(unknown)}")
    fabric = {}
    for key in ("nvswitches", "ib_ports"):
        if key in data:
            fabric[key] = int(_number(data[key], f"{where}.{key}", 0, 64))
    if "ib_rate_gbps" in data:
        fabric["ib_rate_gbps"] = int(_number(data["ib_rate_gbps"], f"{where}.ib_rate_gbps", 1, 1600))
    if "imex" in data:
        _expect(isinstance(data["imex"], bool), f"{where}.imex", "must be true or false")
        fabric["imex"] = data["imex"]
    return fabric


def _parse_fault(data: Any, where: str, node: NodeSpec) -> Fault:
    _expect(isinstance(data, dict), where, "must be an object")
    kind = _one_of(data.get("fault"), tuple(FAULTS), f"{where}.fault")
    allowed, gpu_required, gpu_all = FAULTS[kind]
    unknown = set(data) - _FAULT_COMMON - allowed
    _expect(not unknown, where, f"unknown keys {sorted(unknown)} for fault {kind!r}")
    at_s = _number(data.get("at_s"), f"{where}.at_s", 0, 10**7)
    clear = data.get("clear_at_s")
    if clear is not None:
        clear = _number(clear, f"{where}.clear_at_s", at_s, 10**7)
        _expect(clear > at_s, f"{where}.clear_at_s", "must be after at_s")
    gpu = data.get("gpu")
    if gpu is None:
        _expect(not gpu_required, f"{where}.gpu", f"fault {kind!r} needs a GPU index")
    elif gpu == "all":
        _expect(gpu_all, f"{where}.gpu", f"fault {kind!r} applies to one GPU, not 'all'")
    else:
        _expect(
            isinstance(gpu, int) and not isinstance(gpu, bool) and 0 <= gpu < node.gpu_count,
            f"{where}.gpu",
            f"GPU {gpu!r} does not exist (the node has {node.gpu_count})",
        )
    params = {key: data[key] for key in allowed if key in data}
    if kind == "xid":
        _number(params.get("code"), f"{where}.code", 1, 1000)
    if kind in ("volume_full", "volume_read_only", "volume_hung") and "mount" in params:
        from fleet_agent.simulator.procfs import MOUNTS

        data_mounts = tuple(m[3] for m in MOUNTS if m[4] in ("ext4", "xfs", "nfs4", "vfat"))
        _one_of(params["mount"], data_mounts, f"{where}.mount")
    if kind == "peermem_missing":
        _expect(node.rdma_devices > 0, f"{where}.fault", "peermem_missing needs a node with rdma_devices")
    if kind == "ecc_uncorrectable" and "containment" in params:
        _one_of(params["containment"], ("contained", "uncontained"), f"{where}.containment")
    if kind == "spot_notice":
        _expect(
            node.is_cloud, f"{where}.fault", f"spot_notice needs a cloud node, not provider {node.provider!r}"
        )
        kinds = SPOT_NOTICE_KINDS[node.provider]
        _one_of(params.setdefault("kind", kinds[0]), kinds, f"{where}.kind")
    if kind.startswith("ib_"):
        ports = node.fabric_layout()["ib_ports"]
        _expect(ports > 0, f"{where}.fault", f"{kind} needs a node with InfiniBand ports (fabric.ib_ports)")
        port = params.get("port", 0)
        _expect(isinstance(port, int) and 0 <= port < ports, f"{where}.port",
                f"port {port!r} does not exist (the node has {ports})")
    if kind in ("nvlink_down", "nvlink_errors"):
        links = GPU_MODELS[node.gpu_model]["nvlinks"]
        link = params.get("link", 0)
        _expect(isinstance(link, int) and 0 <= link < links, f"{where}.link",
                f"link {link!r} does not exist ({node.gpu_model} has {links} NVLinks)")
    if kind == "nvlink_errors":
        _one_of(params.get("counter", "crc_flit"), ("replay", "recovery", "crc_flit", "crc_data"), f"{where}.counter")
    if kind == "ib_errors":
        _one_of(params.get("counter", "symbol_error"),
                ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors"), f"{where}.counter")
    if kind == "fabric_manager_down":
        _expect(node.fabric_layout()["nvswitches"] > 0, f"{where}.fault",
                "fabric_manager_down needs a node with NVSwitches (fabric.nvswitches)")
    if kind == "imex_down":
        _expect(node.fabric_layout()["imex"], f"{where}.fault", "imex_down needs a node with fabric.imex = true")
    return Fault(kind=kind, at_s=at_s, clear_at_s=clear, gpu=gpu, params=params)


# -- small validators ----------------------------------------------------------------------------


def _expect(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise ScenarioError(f"{where}: {message}")


def _number(value: Any, where: str, low: float, high: float) -> float:
    _expect(
        isinstance(value, int | float) and not isinstance(value, bool),
        where,
        f"expected a number, got {value!r}",
    )
    _expect(low <= value <= high, where, f"must be between {low:g} and {high:g}, got {value!r}")
    return float(value)


def _one_of(value: Any, choices: tuple[str, ...], where: str) -> str:
    _expect(value in choices, where, f"expected one of {', '.join(choices)}, got {value!r}")
    return value
