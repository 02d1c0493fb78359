"""Google Compute Engine: identity and the ``preempted`` / ``maintenance-event`` flags (``Metadata-Flavor``)."""

from __future__ import annotations

from datetime import timedelta

from fleet_agent.collectors.cloud.metadata import CloudBackend, Notice, Response, spot_from_text, text

GCP_PREEMPT_NOTICE_S = 30


class Gcp(CloudBackend):
    name, default_metadata_url = "gcp", "http://metadata.google.internal"
    dmi_prefixes = {"product_name": "Google Compute Engine"}

    def _get(self, path: str) -> Response | None:
        return self.service.request("GET", f"/computeMetadata/v1/instance/{path}", {"Metadata-Flavor": "Google"})

    def identity(self) -> dict | None:
        instance_id = text(self._get("id"))
        if instance_id is None:
            return None
        zone = (text(self._get("zone")) or "").rsplit("/", 1)[-1]
        spot = spot_from_text(text(self._get("scheduling/provisioning-model")), ("SPOT",), ("STANDARD",))
        if spot is None:
            spot = spot_from_text(text(self._get("scheduling/preemptible")), ("TRUE",), ("FALSE",))
        return {
            "instance_id": instance_id,
            "instance_type": (text(self._get("machine-type")) or "").rsplit("/", 1)[-1] or None,
            "region": zone.rsplit("-", 1)[0] if zone.count("-") >= 2 else (zone or None),
            "spot": spot,
        }

    def notices(self) -> list[Notice]:
        notices: list[Notice] = []
        preempted = text(self._get("preempted"))
        if preempted is not None:
            if preempted.upper() == "TRUE":
                # GCP gives no deadline: hard-off comes 30 s after the soft-off signal we just saw.
                notices.append(("preempt", timedelta(seconds=GCP_PREEMPT_NOTICE_S), "gcp.preempted",
                                {"preempted": preempted}))
            elif preempted.upper() != "FALSE":
                self.service.warn("gcp.preempted", "malformed GCP preempted value %r", preempted[:200])
        event = text(self._get("maintenance-event"))
        if event and event.upper() != "NONE":
            if event.upper().replace("-", "_").isidentifier():
                notices.append(("maintenance", None, "gcp.maintenance-event", {"maintenance-event": event}))
            else:
                self.service.warn("gcp.maintenance-event", "malformed GCP maintenance-event %r", event[:200])
        return notices
