"""Responsibility routing: a finding's layer × the node's effective boundary → who acts, and how.

The boundary comes from `fleet.inventory.selectors.boundary_matrices` (default matrix → provider contract →
node override). The action text depends on the party and the delivery form: the same GPU fault is a provider
ticket on a cloud instance and a drain / reboot / RMA on our own bare metal.
"""

from dataclasses import dataclass

from fleet.core.i18n import Msg, as_json, text
from fleet.inventory.boundary import LAYER_ORDER
from fleet.inventory.choices import CLOUD_FORMS, DeliveryForm, Layer, Owner

from .choices import ActionKind


@dataclass(frozen=True)
class Routing:
    party: str
    source: str
    layer: str
    action_kind: str
    action_msg: Msg

    @property
    def action(self) -> str:
        """The action in English (the finding's `recommended_action` column, tickets)."""
        return text(self.action_msg)

    def as_dict(self) -> dict:
        return {"party": self.party, "source": self.source, "layer": self.layer, "action_kind": self.action_kind,
                "action": self.action, "action_msg": as_json(self.action_msg)}


def _applicable_cell(layer: str, cells: dict):
    """The boundary cell for `layer`; a layer that does not exist for this delivery form (virtualization on bare
    metal) falls to the nearest layer beneath it."""
    index = LAYER_ORDER.index(layer)
    for candidate in [LAYER_ORDER[i] for i in range(index, -1, -1)] + LAYER_ORDER[index + 1:]:
        cell = cells.get(candidate)
        if cell is not None and cell.owner != Owner.NOT_APPLICABLE:
            return cell
    return None


def _bare(remedy: str | Msg | dict) -> Msg:
    """The remedy as a message without its final full stop (it is set inside a sentence)."""
    if isinstance(remedy, dict):
        remedy = Msg.known(remedy.get("id", ""), **(remedy.get("params") or {}))  # a stored message
    if isinstance(remedy, str):
        remedy = Msg.known(remedy.strip().rstrip(".")) if remedy.strip().rstrip(".") else None
    elif remedy.id.endswith(".") and not remedy.params:
        remedy = Msg.known(remedy.id.rstrip("."))
    return remedy or Msg("investigate with the evidence bundle")


def _layer_label(layer: str) -> Msg | str:
    # The layer labels are the inventory's choices; lower-cased in a sentence.
    return Msg.known(Layer(layer).label.lower()) if layer in Layer.values else layer


def route(*, layer: str, cells: dict, delivery_form: str, provider_name: str, remedy: str | Msg | dict,
          provider_initiated: bool = False, escalated: bool = False) -> Routing:
    """`remedy`: the observation's or the definition's remedy (text, a Msg, or a stored {"id","params"})."""
    cell = _applicable_cell(layer, cells)
    party = cell.owner if cell is not None else Owner.US
    source = cell.source if cell is not None else "default"
    used_layer = cell.layer if cell is not None else layer
    provider = provider_name or Msg("the provider")
    layer_label = _layer_label(used_layer)
    remedy = _bare(remedy)

    if provider_initiated:
        kind = ActionKind.INTERNAL_FIX
        if party in (Owner.PROVIDER, Owner.SHARED):
            action = Msg("{provider} initiated this on purpose ({layer}); no ticket is needed. {remedy}.",
                         provider=provider, layer=layer_label, remedy=remedy.capitalised())
        else:
            action = Msg("The platform initiated this on purpose ({layer}); no ticket is needed. {remedy}.",
                         layer=layer_label, remedy=remedy.capitalised())
    elif party == Owner.PROVIDER and escalated:
        kind, action = ActionKind.PROVIDER_TICKET, _provider_escalated(used_layer, delivery_form, provider, remedy,
                                                                       layer_label)
    elif party == Owner.PROVIDER:
        kind, action = ActionKind.PROVIDER_TICKET, _provider_action(used_layer, delivery_form, provider, remedy,
                                                                    layer_label)
    elif party == Owner.HARDWARE_VENDOR and escalated:
        kind = ActionKind.VENDOR_RMA
        action = Msg("Our hardware, escalated (the fault repeated past its threshold): drain the node and {remedy}; "
                     "open an RMA with the hardware vendor now and attach the evidence bundle.", remedy=remedy)
    elif party == Owner.HARDWARE_VENDOR:
        kind = ActionKind.VENDOR_RMA
        action = Msg("Our hardware, with vendor support: drain the node, then {remedy}. If it repeats after one "
                     "reboot, open an RMA with the hardware vendor and attach the evidence bundle.", remedy=remedy)
    elif party == Owner.SHARED:
        kind = ActionKind.JOINT
        action = Msg("Shared with {provider} ({layer}): {remedy}. Open a ticket with {provider} in parallel "
                     "and attach the evidence bundle.", provider=provider, layer=layer_label, remedy=remedy)
    else:
        kind = ActionKind.INTERNAL_FIX
        form = (Msg.known(DeliveryForm(delivery_form).label) if delivery_form in DeliveryForm.values
                else delivery_form)
        action = Msg("Ours to fix ({layer} on {form}): {remedy}.", layer=layer_label, form=form, remedy=remedy)
    return Routing(party=party, source=source, layer=used_layer, action_kind=kind, action_msg=action)


def _provider_escalated(layer: str, delivery_form: str, provider, remedy: Msg, layer_label) -> Msg:
    """The escalated action said as reached: no "if it repeats" clause, it has repeated."""
    if layer == Layer.HARDWARE and delivery_form in CLOUD_FORMS:
        return Msg("Escalated (the fault repeated past its threshold): {remedy}. Open a ticket with {provider}, "
                   "attach the evidence bundle and ask for the instance to be replaced.",
                   remedy=remedy, provider=provider)
    if layer == Layer.HARDWARE:
        return Msg("Escalated (the fault repeated past its threshold): drain the node and {remedy}. Open a ticket "
                   "with {provider}, attach the evidence bundle and ask them to swap the part or the server.",
                   remedy=remedy, provider=provider)
    return Msg("Escalated (the fault repeated past its threshold): {remedy}. Open a ticket with {provider} "
               "({layer}) and attach the evidence bundle.", remedy=remedy, provider=provider, layer=layer_label)


def _provider_action(layer: str, delivery_form: str, provider, remedy: Msg, layer_label) -> Msg:
    if layer == Layer.HARDWARE and delivery_form in CLOUD_FORMS:
        return Msg("{provider} owns the hardware of this instance: open a ticket with {provider} and attach the "
                   "evidence bundle (first step: {remedy}). If it repeats, ask for the instance to be replaced.",
                   provider=provider, remedy=remedy)
    if layer == Layer.HARDWARE:
        return Msg("{provider} owns the hardware: drain the node, open a ticket with {provider}, attach the evidence "
                   "bundle and ask for on-site inspection (first step: {remedy}). If it repeats, ask them to swap "
                   "the part or the server.", provider=provider, remedy=remedy)
    if layer == Layer.FACILITY:
        return Msg("{provider} runs the facility (power, cooling, uplink): report it with the evidence bundle "
                   "({remedy}).", provider=provider, remedy=remedy)
    if layer == Layer.VIRTUALIZATION:
        return Msg("{provider} runs the virtualization layer: open a ticket with {provider} and attach the evidence "
                   "bundle ({remedy}).", provider=provider, remedy=remedy)
    return Msg("{provider} manages the {layer} on this node: do not change it yourself; open a ticket with "
               "{provider} and attach the evidence bundle ({remedy}).", provider=provider, layer=layer_label,
               remedy=remedy)
