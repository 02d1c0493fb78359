"""Responsibility routing: a finding's layer × the node's effective boundary → who acts, and how.

The boundary comes from `fleet.inventory.selectors.boundary_matrices` (default matrix → provider contract →
node override). The action text depends on the party and the delivery form: the same GPU fault is a provider
ticket on a cloud instance and a drain / reboot / RMA on our own bare metal.
"""

from dataclasses import dataclass

from fleet.inventory.boundary import LAYER_ORDER
from fleet.inventory.choices import CLOUD_FORMS, DeliveryForm, Layer, Owner

from .choices import ActionKind


@dataclass(frozen=True)
class Routing:
    party: str
    source: str
    layer: str
    action_kind: str
    action: str

    def as_dict(self) -> dict:
        return {"party": self.party, "source": self.source, "layer": self.layer, "action_kind": self.action_kind,
                "action": self.action}


def _applicable_cell(layer: str, cells: dict):
    """The boundary cell for `layer`; a layer that does not exist for this delivery form (virtualization on bare
    metal) falls to the nearest layer beneath it."""
    index = LAYER_ORDER.index(layer)
    for candidate in [LAYER_ORDER[i] for i in range(index, -1, -1)] + LAYER_ORDER[index + 1:]:
        cell = cells.get(candidate)
        if cell is not None and cell.owner != Owner.NOT_APPLICABLE:
            return cell
    return None


def _sentence(text: str) -> str:
    text = text.strip().rstrip(".")
    return text[:1].upper() + text[1:] + "." if text else ""


def route(*, layer: str, cells: dict, delivery_form: str, provider_name: str, remedy: str,
          provider_initiated: bool = False, escalated: bool = False) -> Routing:
    cell = _applicable_cell(layer, cells)
    party = cell.owner if cell is not None else Owner.US
    source = cell.source if cell is not None else "default"
    used_layer = cell.layer if cell is not None else layer
    provider = provider_name or "the provider"
    layer_label = Layer(used_layer).label.lower() if used_layer in Layer.values else used_layer
    remedy = remedy.strip().rstrip(".") or "investigate with the evidence bundle"

    if provider_initiated:
        kind = ActionKind.INTERNAL_FIX
        who = provider if party in (Owner.PROVIDER, Owner.SHARED) else "The platform"
        text = f"{who} initiated this on purpose ({layer_label}); no ticket is needed. {_sentence(remedy)}"
    elif party == Owner.PROVIDER and escalated:
        kind, text = ActionKind.PROVIDER_TICKET, _provider_escalated(used_layer, delivery_form, provider, remedy,
                                                                     layer_label)
    elif party == Owner.PROVIDER:
        kind, text = ActionKind.PROVIDER_TICKET, _provider_action(used_layer, delivery_form, provider, remedy,
                                                                  layer_label)
    elif party == Owner.HARDWARE_VENDOR and escalated:
        kind = ActionKind.VENDOR_RMA
        text = (f"Our hardware, escalated (the fault repeated past its threshold): drain the node and {remedy}; "
                f"open an RMA with the hardware vendor now and attach the evidence bundle.")
    elif party == Owner.HARDWARE_VENDOR:
        kind = ActionKind.VENDOR_RMA
        text = (f"Our hardware, with vendor support: drain the node, then {remedy}. If it repeats after one "
                f"reboot, open an RMA with the hardware vendor and attach the evidence bundle.")
    elif party == Owner.SHARED:
        kind = ActionKind.JOINT
        text = (f"Shared with {provider} ({layer_label}): {remedy}. Open a ticket with {provider} in parallel "
                f"and attach the evidence bundle.")
    else:
        kind = ActionKind.INTERNAL_FIX
        form = DeliveryForm(delivery_form).label if delivery_form in DeliveryForm.values else delivery_form
        text = f"Ours to fix ({layer_label} on {form}): {remedy}."
    return Routing(party=party, source=source, layer=used_layer, action_kind=kind, action=text)


def _provider_escalated(layer: str, delivery_form: str, provider: str, remedy: str, layer_label: str) -> str:
    """The escalated action said as reached: no "if it repeats" clause, it has repeated."""
    if layer == Layer.HARDWARE and delivery_form in CLOUD_FORMS:
        return (f"Escalated (the fault repeated past its threshold): {remedy}. Open a ticket with {provider}, "
                f"attach the evidence bundle and ask for the instance to be replaced.")
    if layer == Layer.HARDWARE:
        return (f"Escalated (the fault repeated past its threshold): drain the node and {remedy}. Open a ticket "
                f"with {provider}, attach the evidence bundle and ask them to swap the part or the server.")
    return (f"Escalated (the fault repeated past its threshold): {remedy}. Open a ticket with {provider} "
            f"({layer_label}) and attach the evidence bundle.")


def _provider_action(layer: str, delivery_form: str, provider: str, remedy: str, layer_label: str) -> str:
    if layer == Layer.HARDWARE and delivery_form in CLOUD_FORMS:
        return (f"{provider} owns the hardware of this instance: open a ticket with {provider} and attach the "
                f"evidence bundle (first step: {remedy}). If it repeats, ask for the instance to be replaced.")
    if layer == Layer.HARDWARE:
        return (f"{provider} owns the hardware: drain the node, open a ticket with {provider}, attach the evidence "
                f"bundle and ask for on-site inspection (first step: {remedy}). If it repeats, ask them to swap "
                f"the part or the server.")
    if layer == Layer.FACILITY:
        return (f"{provider} runs the facility (power, cooling, uplink): report it with the evidence bundle "
                f"({remedy}).")
    if layer == Layer.VIRTUALIZATION:
        return (f"{provider} runs the virtualization layer: open a ticket with {provider} and attach the evidence "
                f"bundle ({remedy}).")
    return (f"{provider} manages the {layer_label} on this node: do not change it yourself; open a ticket with "
            f"{provider} and attach the evidence bundle ({remedy}).")
