"""A real OpenSSH sshd on high ports of 127.0.0.1, with a generated host key and user key, for the SSH tests.

It runs as the test's own user and lets in that user only, with the generated key only. `bin_dir` comes first on
the sessions' PATH (sshd's `SetEnv`), so a test can stand in for `nvidia-smi` or `systemctl` on this machine
without touching the system's.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

SSHD_BINARY = shutil.which("sshd") or "/usr/sbin/sshd"


def free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def keygen(path: Path, comment: str) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


@dataclass
class SSHD:
    ports: list[int]
    user: str
    host_public_key: str
    user_private_key: str
    bin_dir: Path
    directory: Path
    processes: list[subprocess.Popen]

    @property
    def port(self) -> int:
        return self.ports[0]

    def fake_command(self, name: str, script: str) -> Path:
        path = self.bin_dir / name
        path.write_text("#!/bin/sh\n" + script)
        path.chmod(0o755)
        return path

    def log(self) -> str:
        return "".join(path.read_text(errors="replace") for path in sorted(self.directory.glob("sshd*.log")))


def start_sshd(directory: Path, *, ports: int = 1) -> SSHD:
    if not Path(SSHD_BINARY).exists() or not shutil.which("ssh-keygen"):
        pytest.skip("OpenSSH's sshd is not installed (Debian: openssh-server; .ci/run installs it)")
    directory.mkdir(parents=True, exist_ok=True)
    host_public = keygen(directory / "host_key", "test-host")
    keygen(directory / "user_key", "test-user")
    (directory / "authorized_keys").write_text((directory / "user_key.pub").read_text())
    bin_dir = directory / "bin"
    bin_dir.mkdir(exist_ok=True)
    chosen = free_ports(ports)
    user = getpass.getuser()
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation directory
    # One sshd listens on at most 16 sockets (MAX_LISTEN_SOCKS): more ports, more daemons with the same keys.
    processes = [_spawn(directory, index, chosen[start:start + 16], user, bin_dir)
                 for index, start in enumerate(range(0, len(chosen), 16))]
    deadline = time.monotonic() + 15
    while True:
        try:
            for port in chosen:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if any(p.poll() is not None for p in processes) or time.monotonic() > deadline:
                for process in processes:
                    process.kill()
                logs = "".join(p.read_text() for p in directory.glob("sshd*.log"))
                raise RuntimeError("sshd did not start:\n" + logs) from None
            time.sleep(0.1)
    return SSHD(chosen, user, host_public, (directory / "user_key").read_text(), bin_dir, directory, processes)


def _spawn(directory: Path, index: int, ports: list[int], user: str, bin_dir: Path) -> subprocess.Popen:
    config = directory / f"sshd_config.{index}"
    config.write_text("\n".join([
        *(f"Port {port}" for port in ports), "ListenAddress 127.0.0.1", f"HostKey {directory / 'host_key'}",
        f"PidFile {directory / f'sshd.{index}.pid'}", f"AuthorizedKeysFile {directory / 'authorized_keys'}",
        "StrictModes no", "UsePAM no", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password", f"AllowUsers {user}", "MaxStartups 100:30:200", "MaxSessions 50",
        f"SetEnv PATH={bin_dir}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LogLevel VERBOSE", ""]))
    with (directory / f"sshd.{index}.log").open("wb") as log:
        return subprocess.Popen([SSHD_BINARY, "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT)


def stop_sshd(server: SSHD) -> None:
    for process in server.processes:
        process.terminate()
    for process in server.processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
