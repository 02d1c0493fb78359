"""Builds the agent's parts from a ``Config``: collectors, engine, delivery target."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fleet_agent.agent import AgentCore
from fleet_agent.client import REPORTS_PATH, ControlPlaneClient
from fleet_agent.collectors.checkpoint import CheckpointCollector
from fleet_agent.collectors.fabric import FabricCollector
from fleet_agent.collectors.host_health import HostHealthCollector
from fleet_agent.collectors.stack import StackCollector
from fleet_agent.collectors.system import SystemCollector
from fleet_agent.config import Config
from fleet_agent.credentials import credential_path, load_enrollment
from fleet_agent.identity import node_identity
from fleet_agent.nvml import NvmlAdapter
from fleet_agent.report import NodeIdentity, ReportBuilder, SequenceSource
from fleet_agent.sender import Target
from fleet_agent.spool import Spool

log = logging.getLogger(__name__)

KMSG = "/dev/kmsg"


def resolve_kernel_log_source(setting: str) -> str | None:
    """``auto`` → /dev/kmsg when readable (root or CAP_SYSLOG), else the journal, else off."""
    if setting == "off":
        return None
    if setting != "auto":
        return setting
    if os.access(KMSG, os.R_OK):
        return "kmsg"
    if shutil.which("journalctl"):
        return "journal"
    log.warning(
        "no readable kernel log (need root or CAP_SYSLOG for /dev/kmsg, or journalctl): Xid "
        "errors come from NVML events unless nvml_events = off; SXid and AER are not seen"
    )
    return None


def make_kernel_log(source: str | None, state_path: Path, proc_root: str | Path = "/proc") -> Any:
    """The kernel-log collector; it reads the boot time (kmsg stamps are since boot) from `proc_root`, the same
    /proc as every other collector."""
    if source is None:
        return None
    try:
        from fleet_agent.collectors.kernel_log import KernelLogCollector
    except ImportError as err:  # packaging bug; keep collecting everything else
        log.error("kernel log collector unavailable: %s", err)
        return None
    if source.startswith("kmsg:"):  # kmsg records from another path (a FIFO standing in for /dev/kmsg)
        return KernelLogCollector("kmsg", state_path, kmsg_path=source[len("kmsg:"):], proc_root=proc_root)
    return KernelLogCollector(source, state_path, proc_root=proc_root)


def make_cloud(config: Config) -> Any:
    try:
        from fleet_agent.collectors.cloud import CloudCollector
    except ImportError as err:
        log.error("cloud collector unavailable: %s", err)
        return None
    cloud = None if config.cloud == "auto" else config.cloud
    return CloudCollector(sys_root=config.sys_root, cloud=cloud, metadata_url=config.metadata_url)


def load_identity(config: Config) -> NodeIdentity:
    enrollment = None
    try:
        enrollment = load_enrollment(credential_path(config.state_dir))
    except ValueError as err:
        log.warning("%s", err)
    state_dir = config.state_dir if os.access(Path(config.state_dir).parent, os.W_OK) else None
    return node_identity(config.host_root, state_dir, enrollment.node_id if enrollment else None)


def make_core(
    config: Config,
    *,
    sequences: SequenceSource,
    spool: Spool | None,
    identity: NodeIdentity,
    kernel_log_source: str | None,
    kernel_log_state: Path,
    nvml_module: Any = None,
) -> AgentCore:
    builder = ReportBuilder(sequences=sequences, identity=identity, interval_s=config.interval_s)
    return AgentCore(
        builder=builder,
        nvml=NvmlAdapter(nvml_module, expected_gpu_count=config.expected_gpus),
        system=SystemCollector(
            config.proc_root,
            host_health=HostHealthCollector(config.proc_root, sys_root=config.sys_root, host_root=config.host_root),
        ),
        stack=StackCollector(host_root=config.host_root, proc_root=config.proc_root, python=config.python),
        kernel_log=make_kernel_log(kernel_log_source, kernel_log_state, config.proc_root),
        cloud=make_cloud(config),
        checkpoint=CheckpointCollector(config.checkpoint_dirs) if config.checkpoint_dirs else None,
        spool=spool,
        fabric=FabricCollector(sys_root=config.sys_root, host_root=config.host_root, proc_root=config.proc_root),
    )


def delivery_target(config: Config, identity: NodeIdentity | None = None) -> Callable[[], Target | None]:
    """Reads the credential file on demand, so a re-enrolment is picked up without a restart."""
    path = credential_path(config.state_dir)
    cache: dict[str, Any] = {"stamp": None, "target": None}

    def target() -> Target | None:
        try:
            stat = path.stat()
        except FileNotFoundError:
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != cache["stamp"]:
            try:
                enrollment = load_enrollment(path)
            except ValueError as err:
                log.error("%s", err)
                return None
            if enrollment is None:
                return None
            server = config.server or enrollment.server
            client = ControlPlaneClient(server, credential=enrollment.credential, ca_file=config.ca_file)
            cache["target"] = (client, enrollment.reports_url or REPORTS_PATH)
            cache["stamp"] = stamp
            if identity is not None:
                identity.node_id = enrollment.node_id
        return cache["target"]

    return target
