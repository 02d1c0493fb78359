"""Step 2 — software chain: driver ↔ CUDA ↔ framework compatible, GPU architecture built in, no drift."""

import re

from fleet.core.i18n import Join, Msg
from fleet.inventory.boundary import LAYER_ORDER
from fleet.inventory.choices import BASELINE_STACK_FIELDS, STACK_FIELDS, STACK_LIST_FIELDS, Layer
from fleet.inventory.models import Baseline, SoftwareStack
from fleet.inventory.selectors import stack_drift

from ..choices import Severity, TriageStep
from .base import Observation, Param, node_rule
from .compat import arch_supported, format_cuda, parse_capability, parse_cuda, sm_name

# Which layer a drifted field belongs to; a drift finding sits on the lowest layer that drifted.
DRIFT_FIELD_LAYER = {
    "os": Layer.HOST_OS, "kernel": Layer.HOST_OS, "container_runtime": Layer.HOST_OS,
    "driver_version": Layer.GPU_DRIVER, "cuda_driver_version": Layer.GPU_DRIVER,
    "cuda_toolkits": Layer.CUDA_RUNTIME, "nvidia_container_toolkit": Layer.CUDA_RUNTIME,
}


def _framework_label(framework: dict) -> str:
    return f"{framework.get('name') or 'framework'} {framework.get('version') or ''}".strip()


def _memo(ctx, key: tuple | None, compute):
    """Per-cycle cache for results that depend only on the stack (and the given parts); no key, no cache."""
    if key is None:
        return compute()
    if key not in ctx.memo:
        ctx.memo[key] = compute()
    return ctx.memo[key]


# Forward compatibility (cuda-compat) works on data-center GPUs only (NVIDIA, "CUDA Compatibility": "forward
# compatibility is supported only on NVIDIA Data Center GPUs and select NGC Server Ready RTX SKUs"); GeForce,
# TITAN and workstation boards are out.
_CONSUMER_GPU = re.compile(r"geforce|titan|quadro|\brtx\b", re.IGNORECASE)
_DATACENTER_GPU = re.compile(r"\b(?:tesla|[abhltv]\d|gh\d|gb\d|a\d\d|h\d\d\d|b\d\d\d|l\d\d)", re.IGNORECASE)


def is_datacenter_gpu(model: str | None) -> bool:
    if not model or _CONSUMER_GPU.search(model):
        return False
    return bool(_DATACENTER_GPU.search(model))


_KIND_WORDS = {"framework": "framework", "runtime_library": "CUDA runtime library", "container": "container",
               "toolkit": "CUDA toolkit"}


def _cuda_runtimes(stack: dict) -> tuple[list[dict], list[dict]]:
    """Every CUDA runtime the node carries — framework builds, the runtime libraries they ship, containers' images,
    installed toolkits — and the forward-compatibility packages, each as {kind, name, version, cuda}."""
    runtimes, compat = [], []
    for entry in stack.get("frameworks") or []:
        if not isinstance(entry, dict):
            continue
        version = parse_cuda(entry.get("cuda"))
        if version is None:
            continue
        kind = entry.get("kind") or "framework"
        item = {"kind": kind, "name": entry.get("name") or kind, "version": entry.get("version"),
                "cuda": version}
        (compat if kind == "cuda_compat" else runtimes).append(item)
    for toolkit in stack.get("cuda_toolkits") or []:
        version = parse_cuda(toolkit)
        if version is not None:
            runtimes.append({"kind": "toolkit", "name": f"cuda-{toolkit}", "version": str(toolkit),
                             "cuda": version})
    return runtimes, compat


def _runtime_phrase(item: dict) -> Msg:
    cuda = format_cuda(item["cuda"])
    if item["kind"] == "framework":
        return Msg("{framework} was built for CUDA {cuda}", framework=_framework_label(item), cuda=cuda)
    if item["kind"] == "toolkit":
        return Msg("CUDA toolkit {cuda} is installed (/usr/local/cuda-{version})", cuda=cuda,
                   version=item["version"])
    if item["kind"] == "container":
        return Msg("{name} runs CUDA {cuda}", name=item["name"], cuda=cuda)
    return Msg("{name} {version} (shipped with the frameworks) is CUDA {cuda}", name=item["name"],
               version=item.get("version") or "", cuda=cuda)


def _too_new(runtimes: list[dict], ceiling: tuple[int, int], allow_minor: bool) -> list[dict]:
    return [item for item in runtimes
            if ((item["cuda"][0] > ceiling[0]) if allow_minor else (item["cuda"] > ceiling))]


def _cuda_judged(stack: dict, models: tuple, allow_minor: bool) -> dict | None:
    """The verdict for a stack on GPUs of these models; None when the driver's CUDA version is unknown."""
    driver_cuda = parse_cuda(stack.get("cuda_driver_version"))
    if driver_cuda is None:
        return None
    datacenter = all(is_datacenter_gpu(m) for m in models) if models and all(models) else None
    return {**_cuda_verdict(stack, driver_cuda, allow_minor, datacenter), "driver_cuda": driver_cuda,
            "datacenter": datacenter}


def _cuda_verdict(stack: dict, driver_cuda: tuple[int, int], allow_minor: bool, datacenter: bool | None) -> dict:
    runtimes, compat = _cuda_runtimes(stack)
    ceiling, compat_note, honoured = driver_cuda, "", None  # compat_note: "" or a Msg
    if compat:
        best = max(compat, key=lambda c: c["cuda"])
        label = f"cuda-compat {format_cuda(best['cuda'])} (libcuda {best.get('version') or '?'})"
        if datacenter:
            honoured = best
            ceiling = max(driver_cuda, best["cuda"])
            compat_note = Msg(", {label} raises it to {cuda} on these data-center GPUs", label=label,
                              cuda=format_cuda(ceiling))
        elif datacenter is False:
            compat_note = Msg("; {label} is installed but ignored: forward compatibility needs data-center GPUs",
                              label=label)
        else:
            compat_note = Msg("; {label} is installed but not counted: the GPU model is unknown", label=label)
    return {"problems": _too_new(runtimes, ceiling, allow_minor), "ceiling": ceiling, "compat_note": compat_note,
            "compat": compat, "honoured": honoured}


def _cuda_driver_too_old(node, params, ctx):
    stack = node.stack
    if not stack:
        return None
    allow_minor = params["allow_minor_version_compat"]
    # Keyed on what the verdict depends on, so a fleet of a few stacks and GPU models computes it a few times.
    models = tuple(sorted({kind[0] or "" for kind in node.gpu_kinds}))
    key = ("cuda", allow_minor, models, node.stack_key) if node.stack_key is not None else None
    verdict = _memo(ctx, key, lambda: _cuda_judged(stack, models, allow_minor))
    if verdict is None:
        return None
    problems = verdict["problems"]
    if not problems:
        return []
    driver_cuda, datacenter = verdict["driver_cuda"], verdict["datacenter"]
    driver = stack.get("driver_version") or "?"
    needed = max(item["cuda"] for item in problems)
    summary = Msg("driver {driver} supports CUDA ≤ {cuda}{compat_note}, {problems}", driver=driver,
                  cuda=format_cuda(driver_cuda), compat_note=verdict["compat_note"],
                  problems=Join([_runtime_phrase(item) for item in problems]))
    kinds = {item["kind"] for item in problems}
    ceiling = format_cuda(verdict["ceiling"])
    fixes = []
    frameworks = sorted({item["name"] for item in problems if item["kind"] in ("framework", "runtime_library")})
    if frameworks:
        fixes.append(Msg("install a {frameworks} build for CUDA ≤ {cuda}", frameworks=", ".join(frameworks),
                         cuda=ceiling))
    if "container" in kinds:
        fixes.append(Msg("run container images built for CUDA ≤ {cuda}", cuda=ceiling))
    if "toolkit" in kinds:
        fixes.append(Msg("remove or stop using the CUDA toolkit(s) newer than {cuda}", cuda=ceiling))
    fixes.append(Msg("upgrade the GPU driver to one that supports CUDA {cuda}", cuda=format_cuda(needed)))
    if not verdict["compat"] and datacenter:
        fixes.append(Msg("or install cuda-compat for CUDA {cuda} (forward compatibility, data-center GPUs only)",
                         cuda=format_cuda(needed)))
    # The framework layer when a framework (or what it ships) needs the newer CUDA; a toolkit or a container
    # alone is the CUDA runtime layer. An installed toolkit nobody uses yet is a warning.
    layer = Layer.FRAMEWORK if kinds & {"framework", "runtime_library"} else Layer.CUDA_RUNTIME
    severity = Severity.WARNING if kinds == {"toolkit"} else None
    return [Observation(
        summary=summary, layer=layer, severity=severity,
        remedy=Msg("{fixes}", fixes=Join(fixes)),
        values={"driver_version": driver, "driver_max_cuda": format_cuda(driver_cuda), "effective_max_cuda": ceiling,
                "cuda_compat": [{"version": c.get("version"), "cuda": format_cuda(c["cuda"])}
                                for c in verdict["compat"]],
                "cuda_compat_honoured": verdict["honoured"] is not None, "datacenter_gpus": datacenter,
                "runtimes": [{"kind": item["kind"], "name": item["name"], "version": item.get("version"),
                              "cuda": format_cuda(item["cuda"])} for item in problems],
                "frameworks": [{"name": item["name"], "version": item.get("version"),
                                "cuda": format_cuda(item["cuda"])} for item in problems
                               if item["kind"] == "framework"]})]


def _missing_archs(frameworks, capabilities: tuple) -> list[tuple[dict, tuple[int, int], int]]:
    problems = []
    for framework in frameworks or []:
        if not isinstance(framework, dict):
            continue
        for capability, count in capabilities:
            if arch_supported(framework.get("arch_list"), capability) is False:
                problems.append((framework, capability, count))
    return problems


def _arch_problems(stack: dict, reported: tuple) -> list | None:
    capabilities: dict[tuple[int, int], int] = {}
    for capability, count in reported:
        parsed = parse_capability(capability)
        if parsed is not None:
            capabilities[parsed] = capabilities.get(parsed, 0) + count
    if not capabilities:
        return None
    return _missing_archs(stack.get("frameworks"), tuple(sorted(capabilities.items())))


def _arch_not_supported(node, params, ctx):
    stack = node.stack
    if not stack or not node.gpu_kinds:
        return None
    reported = tuple((capability, count) for _model, _memory, capability, count in node.gpu_kinds)
    key = ("arch", reported, node.stack_key) if node.stack_key is not None else None
    problems = _memo(ctx, key, lambda: _arch_problems(stack, reported))
    if problems is None:  # no GPU with a known compute capability
        return None
    if not problems:
        return []
    parts = [Msg("{framework} has no kernel image for {sm} ({count} GPU(s) of compute capability {capability}; "
                 "built for {archs})", framework=_framework_label(f), sm=sm_name(c), count=n,
                 capability=f"{c[0]}.{c[1]}", archs=", ".join(f.get("arch_list") or [])[:200])
             for f, c, n in problems]
    names = ", ".join(sorted({f.get("name") or "framework" for f, _, _ in problems}))
    archs = ", ".join(sorted({sm_name(c) for _, c, _ in problems}))
    return [Observation(
        summary=Msg("{parts} — \"no kernel image is available for execution on the device\"", parts=Join(parts)),
        remedy=Msg("install a {names} build whose arch list includes {archs} (or PTX for an older architecture)",
                   names=names, archs=archs),
        values={"problems": [{"framework": f.get("name"), "version": f.get("version"),
                              "arch_list": f.get("arch_list"), "compute_capability": f"{c[0]}.{c[1]}",
                              "gpus": n} for f, c, n in problems]})]


def _drift_items(node, ctx) -> list[dict]:
    stack, baseline = node.stack, node.baseline

    def compute():
        return stack_drift(
            stack=SoftwareStack(**{f: stack.get(f) if stack.get(f) is not None else _blank(f)
                                   for f in STACK_FIELDS}),
            baseline=Baseline(**{f: baseline.get(f) if baseline.get(f) is not None else _blank(f)
                                 for f in BASELINE_STACK_FIELDS}))

    key = ("drift", baseline["id"], node.stack_key) if node.stack_key is not None else None
    return _memo(ctx, key, compute)


def _blank(field_name: str):
    return [] if field_name in STACK_LIST_FIELDS else ""


def _drift_layer(field_name: str) -> str:
    if field_name.startswith("frameworks."):
        return Layer.FRAMEWORK
    return DRIFT_FIELD_LAYER.get(field_name, Layer.FRAMEWORK)


def _stack_drift(node, params, ctx):
    if node.baseline is None:
        return []
    if not node.stack:
        return None
    ignored = set(params["ignore_fields"])
    drift = [item for item in _drift_items(node, ctx)
             if item["field"] not in ignored and item["field"].split(".")[0] not in ignored]
    if not drift:
        return []
    layer = min((_drift_layer(item["field"]) for item in drift), key=LAYER_ORDER.index)

    def show(value):
        if isinstance(value, list):
            return ", ".join(map(str, value)) or "—"
        return "—" if value in (None, "") else str(value)

    parts = [f"{item['field']} {show(item['actual'])} (pinned {show(item['expected'])})" for item in drift]
    return [Observation(
        summary=Msg("Drifted from baseline {baseline}: {parts}", baseline=node.baseline.get("name") or "",
                    parts="; ".join(parts)[:450]), layer=layer,
        remedy=Msg("return the node to its pinned stack (or update the baseline if the change was intended)"),
        values={"baseline": node.baseline.get("name"), "drift": drift})]


RULES = [
    node_rule(
        slug="cuda_driver_too_old", title="A CUDA runtime on the node is newer than the driver supports",
        step=TriageStep.SOFTWARE_CHAIN, layer=Layer.FRAMEWORK, severity=Severity.CRITICAL, duration_s=0,
        clear_hold_s=0, check=_cuda_driver_too_old,
        params=(Param("allow_minor_version_compat", "boolean", False,
                      "Accept a framework built for a newer CUDA minor version of the same major (CUDA minor "
                      "version compatibility; PTX JIT still fails)"),),
        description="The driver's maximum CUDA version (raised by a cuda-compat package on data-center GPUs) is lower "
                    "than a CUDA runtime the node carries: a framework build, the runtime library a framework "
                    "ships, a running container's image, or an installed toolkit.",
        remedy="install a framework build for the driver's CUDA, or upgrade the driver"),
    node_rule(
        slug="arch_not_supported", title="GPU architecture missing from the framework's arch list",
        step=TriageStep.SOFTWARE_CHAIN, layer=Layer.FRAMEWORK, severity=Severity.CRITICAL, duration_s=0,
        clear_hold_s=0, check=_arch_not_supported,
        description="A framework build has no kernel image (nor PTX) for the GPUs' compute capability: "
                    "\"no kernel image is available for execution on the device\".",
        remedy="install a framework build that includes this GPU architecture"),
    node_rule(
        slug="stack_drift", title="Software stack drifted from the baseline", step=TriageStep.SOFTWARE_CHAIN,
        layer=Layer.GPU_DRIVER, severity=Severity.WARNING, duration_s=0, clear_hold_s=0, check=_stack_drift,
        params=(Param("ignore_fields", "string_list", [],
                      "Baseline fields not to judge, e.g. [\"kernel\"] or [\"frameworks\"]"),),
        description="The driver, CUDA, toolkit, framework, OS or kernel differs from the pinned baseline.",
        remedy="return the node to its pinned stack"),
]
