"""Who this node is: the machine id (stable across reinstalls of the agent) and the hostname."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

from fleet_agent.report import NodeIdentity


def read_machine_id(host_root: str | Path = "/", fallback_dir: str | Path | None = None) -> str:
    """systemd's machine id; without one, a random id kept in ``fallback_dir`` so it stays stable."""
    root = Path(host_root)
    for relative in ("etc/machine-id", "var/lib/dbus/machine-id"):
        try:
            value = (root / relative).read_text(encoding="ascii").strip()
        except OSError:
            continue
        if value:
            return value[:128]
    if fallback_dir is None:
        return uuid.uuid4().hex
    path = Path(fallback_dir) / "machine-id"
    try:
        value = path.read_text(encoding="ascii").strip()
        if value:
            return value
    except OSError:
        pass
    value = uuid.uuid4().hex
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value + "\n", encoding="ascii")
    return value


def node_identity(
    host_root: str | Path = "/", state_dir: str | Path | None = None, node_id: int | None = None
) -> NodeIdentity:
    return NodeIdentity(
        machine_id=read_machine_id(host_root, state_dir),
        hostname=socket.gethostname()[:253],
        node_id=node_id,
    )
