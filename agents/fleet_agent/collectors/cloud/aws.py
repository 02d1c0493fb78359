"""Amazon EC2: IMDSv2 (a session token on every read) with a fallback to IMDSv1, spot interruptions
(``spot/instance-action``) and rebalance recommendations."""

from __future__ import annotations

import logging
import time

from fleet_agent.collectors.cloud.metadata import CloudBackend, Notice, Response, parse_time, spot_from_text, text

log = logging.getLogger(__name__)

AWS_TOKEN_TTL_S = 21600
AWS_TOKEN_REFRESH_MARGIN_S = 300
AWS_IMDSV1_RETRY_S = 300


class Aws(CloudBackend):
    name, default_metadata_url = "aws", "http://169.254.169.254"
    dmi_prefixes = dict.fromkeys(("product_name", "sys_vendor", "bios_vendor"), "Amazon EC2")
    # The IMDSv2 session: a token until it nears expiry, or IMDSv1 for a while after a refusal.
    _token: str | None = None
    _token_expiry = 0.0
    _imdsv1_until = 0.0

    @classmethod
    def is_bare_metal(cls, dmi: dict[str, str], instance_type: str | None) -> bool:
        return ".metal" in dmi["product_name"] or bool(instance_type and instance_type.endswith(".metal"))

    def _headers(self) -> dict | None:
        now = time.monotonic()
        if self._token and now < self._token_expiry - AWS_TOKEN_REFRESH_MARGIN_S:
            return {"X-aws-ec2-metadata-token": self._token}
        if now < self._imdsv1_until:
            return {}
        response = self.service.request("PUT", "/latest/api/token",
                                        {"X-aws-ec2-metadata-token-ttl-seconds": str(AWS_TOKEN_TTL_S)})
        if response is None:
            return None
        if response.status == 200 and response.body.strip():
            self._token = response.body.decode("ascii", "replace").strip()
            self._token_expiry = now + AWS_TOKEN_TTL_S
            return {"X-aws-ec2-metadata-token": self._token}
        if response.status in (403, 404, 405):
            log.debug("IMDSv2 token refused (%s); using IMDSv1", response.status)
            self._imdsv1_until = now + AWS_IMDSV1_RETRY_S
            return {}
        self.service.warn("aws.token", "IMDSv2 token request answered %s", response.status)
        return None

    def _get(self, path: str) -> Response | None:
        for _attempt in range(2):
            headers = self._headers()
            if headers is None:
                return None
            response = self.service.request("GET", f"/latest/meta-data/{path}", headers)
            if response is None or response.status != 401:
                return response
            self._token, self._imdsv1_until = None, 0.0  # expired or revoked: get a new one
        return response

    def identity(self) -> dict | None:
        instance_id = self._get("instance-id")
        if instance_id is None or instance_id.text() is None:
            return None
        life_cycle = self._get("instance-life-cycle")
        return {
            "instance_id": instance_id.text(),
            "instance_type": text(self._get("instance-type")),
            "region": text(self._get("placement/region")),
            "spot": spot_from_text(text(life_cycle), ("SPOT",), ("ON-DEMAND", "SCHEDULED")),
        }

    def notices(self) -> list[Notice]:
        notices = []
        action = self.service.json("aws.spot.instance-action", self._get("spot/instance-action"))
        if action is not None:
            kind = str(action.get("action", "")).lower()
            if kind in ("terminate", "stop", "hibernate"):
                notices.append((kind, parse_time(action.get("time")), "aws.spot.instance-action", action))
            else:
                self.service.warn("aws.spot.instance-action.kind", "unknown AWS instance-action %r", action)
        rebalance = self.service.json("aws.events.recommendations.rebalance",
                                      self._get("events/recommendations/rebalance"))
        if rebalance is not None:
            notices.append(("rebalance", None, "aws.events.recommendations.rebalance", rebalance))
        return notices
