"""Driver ↔ CUDA ↔ framework compatibility: version parsing and the GPU architecture check."""

import re
from functools import lru_cache

_CUDA = re.compile(r"^\s*(?:cuda\s*)?(\d+)(?:\.(\d+))?")
_ARCH = re.compile(r"^(sm|compute)_(\d+)([a-z]?)$")
_DOTTED_ARCH = re.compile(r"^(\d+)\.(\d+)(\+ptx)?$")


@lru_cache(maxsize=4096)
def parse_cuda(value) -> tuple[int, int] | None:
    """`"12.2"`, `"12.4.1"`, `"cu124"`-free strings and NVML's integer form `12020` → (12, 2)."""
    if value is None or value == "":
        return None
    if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit() and len(value.strip()) >= 4):
        number = int(value)
        if number >= 1000:
            return number // 1000, (number % 1000) // 10
        return number, 0
    match = _CUDA.match(str(value).lower())
    if not match:
        return None
    return int(match.group(1)), int(match.group(2) or 0)


def format_cuda(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


@lru_cache(maxsize=1024)
def parse_capability(value: str | None) -> tuple[int, int] | None:
    """Compute capability `"9.0"` → (9, 0)."""
    if not value:
        return None
    major, _, minor = str(value).strip().partition(".")
    try:
        return int(major), int(minor or 0)
    except ValueError:
        return None


def sm_name(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"


def _arch_entries(arch_list) -> list[tuple[str, tuple[int, int], bool]]:
    """(kind, capability, arch_specific) for each entry; `sm_90a` is arch-specific, `8.6+PTX` gives both kinds."""
    entries = []
    for raw in arch_list or []:
        text = str(raw).strip().lower()
        match = _ARCH.match(text)
        if match:
            digits = match.group(2)
            entries.append((match.group(1), (int(digits[:-1] or 0), int(digits[-1])), bool(match.group(3))))
            continue
        match = _DOTTED_ARCH.match(text)
        if match:
            capability = (int(match.group(1)), int(match.group(2)))
            entries.append(("sm", capability, False))
            if match.group(3):
                entries.append(("compute", capability, False))
    return entries


def arch_supported(arch_list, capability: tuple[int, int]) -> bool | None:
    """Whether a build with `arch_list` has a kernel image for a GPU of `capability`; None if the list is unusable.

    A cubin for sm_X.y runs on X.z with z ≥ y (same major); PTX (compute_X.y) JIT-compiles for any capability
    ≥ X.y. Arch-specific targets (sm_90a) run only on exactly that capability.
    """
    entries = _arch_entries(arch_list)
    if not entries:
        return None
    for kind, built, specific in entries:
        if specific:
            if built == capability:
                return True
        elif kind == "sm":
            if built[0] == capability[0] and built[1] <= capability[1]:
                return True
        elif built <= capability:
            return True
    return False
