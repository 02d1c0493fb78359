"""Alibaba Cloud ECS: identity and the spot ``termination-time`` (UTC)."""

from __future__ import annotations

from datetime import UTC

from fleet_agent.collectors.cloud.metadata import PlainMetadataCloud


class Alibaba(PlainMetadataCloud):
    name, default_metadata_url = "alibaba", "http://100.100.100.200"
    dmi_prefixes = {"product_name": "Alibaba Cloud ECS"}
    region_path, termination_path, termination_tz = "region-id", "instance/spot/termination-time", UTC
