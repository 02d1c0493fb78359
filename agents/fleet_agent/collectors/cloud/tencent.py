"""Tencent Cloud CVM: identity and the spot ``termination-time``, printed in China Standard Time."""

from __future__ import annotations

from datetime import timedelta, timezone

from fleet_agent.collectors.cloud.metadata import PlainMetadataCloud

TENCENT_TZ = timezone(timedelta(hours=8))  # the instance's OS zone, in which Tencent prints the time


class Tencent(PlainMetadataCloud):
    name, default_metadata_url = "tencent", "http://metadata.tencentyun.com"
    dmi_prefixes = {"sys_vendor": "Tencent Cloud"}
    region_path, termination_path, termination_tz = "placement/region", "spot/termination-time", TENCENT_TZ
