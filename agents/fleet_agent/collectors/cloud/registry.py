"""Every cloud the collector knows, by the name the configuration and the protocol use.

Adding a cloud is a module with a ``CloudBackend`` subclass and a line here; nothing else dispatches
on the name.
"""

from __future__ import annotations

from fleet_agent.collectors.cloud.alibaba import Alibaba
from fleet_agent.collectors.cloud.aws import Aws
from fleet_agent.collectors.cloud.azure import Azure
from fleet_agent.collectors.cloud.gcp import Gcp
from fleet_agent.collectors.cloud.metadata import CloudBackend
from fleet_agent.collectors.cloud.tencent import Tencent

CLOUDS: dict[str, type[CloudBackend]] = {
    backend.name: backend for backend in (Aws, Gcp, Azure, Alibaba, Tencent)
}
