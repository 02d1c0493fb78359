"""Microsoft Azure: instance metadata (``Metadata: true``) and Scheduled Events, which the agent can
acknowledge (StartRequests) to let the platform go ahead at once."""

from __future__ import annotations

import json
import logging

from fleet_agent.collectors.cloud.metadata import CloudBackend, Notice, parse_time, spot_from_text

log = logging.getLogger(__name__)

AZURE_CHASSIS_ASSET_TAG = "7783-7084-3265-9085-8269-3286-77"
AZURE_SCHEDULED_EVENTS = "/metadata/scheduledevents?api-version=2020-07-01"
AZURE_COMPUTE = "/metadata/instance/compute?api-version=2021-02-01"
AZURE_KINDS = {"Preempt": "preempt", "Terminate": "terminate", "Reboot": "maintenance",
               "Redeploy": "maintenance", "Freeze": "maintenance"}
SCHEDULED_EVENTS_SOURCE = "azure.scheduledevents"


class Azure(CloudBackend):
    name, default_metadata_url = "azure", "http://169.254.169.254"
    _vm_name: str | None = None  # learnt with the identity: events for other VMs of the set are not ours

    @staticmethod
    def detect(dmi: dict[str, str]) -> bool:
        return dmi["chassis_asset_tag"] == AZURE_CHASSIS_ASSET_TAG  # the whole tag, not a prefix

    def identity(self) -> dict | None:
        compute = self.service.json("azure.compute",
                                    self.service.request("GET", AZURE_COMPUTE, {"Metadata": "true"}))
        if compute is None:
            return None
        self._vm_name = compute.get("name") or None
        priority = str(compute.get("priority") or "")
        return {
            "instance_id": compute.get("vmId") or None,
            "instance_type": compute.get("vmSize") or None,
            "region": compute.get("location") or None,
            "spot": spot_from_text(priority or None, ("SPOT", "LOW"), ("REGULAR",)),
        }

    def notices(self) -> list[Notice]:
        document = self.service.json(SCHEDULED_EVENTS_SOURCE,
                                     self.service.request("GET", AZURE_SCHEDULED_EVENTS, {"Metadata": "true"}))
        if document is None:
            return []
        events = document.get("Events")
        if not isinstance(events, list):
            self.service.warn(SCHEDULED_EVENTS_SOURCE, "Azure scheduled events without an Events list: %r", document)
            return []
        notices = []
        for event in events:
            if not isinstance(event, dict) or event.get("EventType") not in AZURE_KINDS:
                continue
            resources = event.get("Resources") or []
            if self._vm_name and resources and self._vm_name not in resources:
                continue  # an event for another VM in the same availability set
            notices.append((AZURE_KINDS[event["EventType"]], parse_time(event.get("NotBefore")),
                            SCHEDULED_EVENTS_SOURCE, event))
        return notices

    def notice_key(self, source: str, detail: dict) -> str | None:
        # Azure blanks NotBefore and sets EventStatus once an event starts: it stays the same event.
        return detail.get("EventId") if source == SCHEDULED_EVENTS_SOURCE else None

    def acknowledge(self, event_id: str) -> bool:
        body = json.dumps({"StartRequests": [{"EventId": event_id}]}).encode()
        response = self.service.request("POST", AZURE_SCHEDULED_EVENTS,
                                        {"Metadata": "true", "Content-Type": "application/json"}, body)
        if response is None or response.status not in (200, 201, 202, 204):
            log.warning("Azure did not accept the acknowledgement of event %s: %s", event_id,
                        response.status if response else "no answer")
            return False
        return True
