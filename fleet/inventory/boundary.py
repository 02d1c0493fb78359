"""The default responsibility matrix, as data: (layer, delivery form) → owner (docs/concepts.md shows it).

Provider contracts and single nodes override cells (`BoundaryOverride`); `selectors.node_boundary`
merges the three levels and says where each cell came from.
"""

from .choices import DeliveryForm as F
from .choices import Layer as L
from .choices import Owner as O

DEFAULT_MATRIX: dict[str, dict[str, str]] = {
    L.FACILITY: {F.CLOUD_SHARED: O.PROVIDER, F.CLOUD_DEDICATED: O.PROVIDER,
                 F.BARE_METAL_HOSTED: O.PROVIDER,
                 # The colo's (a provider of kind 'idc'); boundary_matrices() makes it ours where the provider
                 # record is our own datacenter (kind 'own').
                 F.BARE_METAL_OWNED: O.PROVIDER},
    L.HARDWARE: {F.CLOUD_SHARED: O.PROVIDER, F.CLOUD_DEDICATED: O.PROVIDER,
                 F.BARE_METAL_HOSTED: O.PROVIDER, F.BARE_METAL_OWNED: O.HARDWARE_VENDOR},
    L.VIRTUALIZATION: {F.CLOUD_SHARED: O.PROVIDER, F.CLOUD_DEDICATED: O.PROVIDER,
                       F.BARE_METAL_HOSTED: O.NOT_APPLICABLE, F.BARE_METAL_OWNED: O.NOT_APPLICABLE},
    L.HOST_OS: {F.CLOUD_SHARED: O.PROVIDER, F.CLOUD_DEDICATED: O.US,
                F.BARE_METAL_HOSTED: O.US, F.BARE_METAL_OWNED: O.US},
    # cloud_dedicated: "provider image or us (per node)" — we default to us; a node that runs the
    # provider's GPU image gets a node override to provider.
    L.GPU_DRIVER: {F.CLOUD_SHARED: O.PROVIDER, F.CLOUD_DEDICATED: O.US,
                   F.BARE_METAL_HOSTED: O.US, F.BARE_METAL_OWNED: O.US},
    L.CUDA_RUNTIME: {form: O.US for form in F},
    L.FRAMEWORK: {form: O.US for form in F},
    L.APPLICATION: {form: O.US for form in F},
}

LAYER_ORDER: list[str] = [layer.value for layer in L]
