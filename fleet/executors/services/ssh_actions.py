"""Things run on a host over SSH: remote diagnostics (for a node whose agent cannot speak), reboot, GPU reset and
operator-installed hooks. Each is recorded as an `SSHAction` *before* it runs, so a retried remediation step
(same idempotency key) finds the first attempt instead of running the side effect twice."""

from __future__ import annotations

import asyncio
import re
import shlex

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework.exceptions import ValidationError

from fleet.core.models import AuditEntry
from fleet.core.services import audit_record
from fleet_agent.protocol import HOOK_NAME_PATTERN, MAX_GPU_INDEX

from .. import ssh
from ..choices import SSHActionKind, SSHActionState
from ..models import SSHAction, SSHHost
from .ssh_hosts import run_async, ssh_host_failed, ssh_host_reached, ssh_target

HOOK_NAME = re.compile(HOOK_NAME_PATTERN)
# Run as the login user; `sudo -n` (never a password prompt) when that user is not root.
SUDO = 'if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo -n"; fi; '
BOOT_ID_COMMAND = "cat /proc/sys/kernel/random/boot_id"
REBOOT_COMMAND = SUDO + "$SUDO systemctl reboot || $SUDO /sbin/reboot"
# Remote diagnostics: each probe stands alone, so a missing tool costs its own section only.
DIAGNOSTICS: dict[str, tuple[str, int]] = {
    "nvidia_smi_xml": ("nvidia-smi -q -x", 512 * 1024),
    "kernel_log": ("journalctl -k -n 300 --no-pager -o short-iso 2>/dev/null || dmesg -T 2>/dev/null | tail -n 300",
                   128 * 1024),
    "xid_lines": ("{ journalctl -k --no-pager -o short-iso 2>/dev/null || dmesg -T 2>/dev/null; } "
                  "| grep -E 'NVRM: (Xid|SXid)' | tail -n 200", 64 * 1024),
    "uptime": ("uptime", 4096),
    "lspci_gpus": ("lspci -n -d 10de: 2>/dev/null", 16 * 1024),
    "boot_id": (BOOT_ID_COMMAND, 256),
    "machine_id": ("cat /etc/machine-id", 256),
    "hostname": ("hostname", 512),
}
DIAGNOSTIC_TIMEOUT_S = 60.0


def hooks_dir() -> str:
    return settings.SSH_HOOKS_DIR


def validate_hook_name(name: str) -> str:
    if not isinstance(name, str) or not HOOK_NAME.match(name):
        raise ValidationError({"name": ["A hook name is letters, digits, '.', '_' and '-' (no path), at most 64."]})
    return name


def validate_gpu_index(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_GPU_INDEX:
        raise ValidationError({"gpu_index": [f"A GPU index is a whole number from 0 to {MAX_GPU_INDEX}."]})
    return value


# -- the record ---------------------------------------------------------------------------------------------------

def ssh_action_request(*, host: SSHHost, kind: str, params: dict, actor, requested_by: str = "",
                       idempotency_key: str | None = None, incident_key: str = "") -> tuple[SSHAction, bool]:
    """The action's row, committed before anything runs; (row, True) when this call created it. A second request
    with the same idempotency key gets the first row back and runs nothing."""
    params = validate_params(kind, params)
    if idempotency_key:
        existing = SSHAction.objects.filter(idempotency_key=idempotency_key).first()
        if existing is not None:
            return existing, False
    try:
        with transaction.atomic():
            action = SSHAction.objects.create(host=host, kind=kind, params=params, idempotency_key=idempotency_key,
                                              incident_key=incident_key, requested_at=timezone.now(),
                                              requested_by=(requested_by or str(actor or "system"))[:150])
            audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=host,
                         note=f"ssh {kind} #{action.pk} requested",
                         after={"kind": kind, "params": params, "incident": incident_key})
    except IntegrityError:  # a concurrent attempt with the same key got there first
        return SSHAction.objects.get(idempotency_key=idempotency_key), False
    return action, True


def validate_params(kind: str, params: dict) -> dict:
    params = dict(params or {})
    if kind == SSHActionKind.GPU_RESET:
        return {"gpu_index": validate_gpu_index(params.get("gpu_index"))}
    if kind == SSHActionKind.RUN_HOOK:
        timeout = params.get("timeout_s", 600)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 1 <= timeout <= 3600:
            raise ValidationError({"timeout_s": ["A hook's timeout is 1 to 3600 seconds."]})
        return {"name": validate_hook_name(params.get("name")), "timeout_s": timeout}
    if kind in (SSHActionKind.DIAGNOSE, SSHActionKind.REBOOT):
        return {}
    raise ValidationError({"kind": [f"Unknown SSH action {kind!r}."]})


def ssh_action_execute(*, action_id: int) -> SSHAction:
    """Run a queued action once. Claiming it (queued → running) is one conditional update, so a task delivered
    twice (acks_late) or a step retried after a crash never runs the side effect a second time."""
    claimed = SSHAction.objects.filter(pk=action_id, state=SSHActionState.QUEUED).update(
        state=SSHActionState.RUNNING, started_at=timezone.now())
    action = SSHAction.objects.select_related("host").get(pk=action_id)
    if not claimed:
        return action
    work = WORK[action.kind]
    try:
        target = ssh_target(action.host)
        ok, message, exit_status, result = run_async(work(target, **action.params, incident_key=action.incident_key))
    except ssh.SSHFailure as failure:
        ssh_host_failed(action.host, failure)
        return _finish(action, ok=False, message=failure.message, result={"error": failure.code})
    ssh_host_reached(action.host)
    return _finish(action, ok=ok, message=message, exit_status=exit_status, result=result)


def _finish(action: SSHAction, *, ok: bool, message: str, exit_status: int | None = None,
            result: dict | None = None) -> SSHAction:
    action.state = SSHActionState.DONE if ok else SSHActionState.FAILED
    action.message = message[:1000]
    action.exit_status = exit_status
    action.result = result or {}
    action.finished_at = timezone.now()
    action.duration_s = round((action.finished_at - (action.started_at or action.finished_at)).total_seconds(), 3)
    action.save()
    return action


# -- diagnostics --------------------------------------------------------------------------------------------------

async def _diagnose(target: ssh.Target, *, incident_key: str = "") -> tuple[bool, str, int | None, dict]:
    async with ssh.connect(target, timeout=settings.SSH_CONNECT_TIMEOUT_S) as connection:
        names = list(DIAGNOSTICS)
        results = await asyncio.gather(*(ssh.run(connection, DIAGNOSTICS[name][0], timeout=DIAGNOSTIC_TIMEOUT_S)
                                         for name in names), return_exceptions=True)
    sections: dict = {}
    for name, outcome in zip(names, results, strict=True):
        limit = DIAGNOSTICS[name][1]
        if isinstance(outcome, ssh.SSHFailure):
            sections[name] = {"available": False, "error": outcome.message}
        elif isinstance(outcome, BaseException):
            raise outcome
        else:
            sections[name] = {"available": outcome.exit_status == 0 and bool(outcome.stdout.strip()),
                              "exit_status": outcome.exit_status, "output": ssh.tail(outcome.stdout, limit),
                              "stderr": ssh.tail(outcome.stderr, 2048), "duration_s": outcome.duration_s}
    bundle = {"source": "ssh", "host": target.label, "collected_at": timezone.now().isoformat(),
              "sections": sections, "summary": diagnostics_summary(sections)}
    readable = [name for name, section in sections.items() if section.get("available")]
    return True, f"collected {len(readable)} of {len(sections)} diagnostics ({', '.join(readable) or 'none'})", \
        0, bundle


def diagnostics_summary(sections: dict) -> dict:
    """The few facts read from the raw sections: PCI GPU count, Xid lines, uptime, boot and machine id."""
    def text(name: str) -> str:
        section = sections.get(name) or {}
        return section.get("output", "") if section.get("available") else ""

    lspci = text("lspci_gpus")
    # `lspci -n`: "01:00.0 0302: 10de:2330 (rev a1)"; display controllers are class 03xx (VGA 0300, 3D 0302).
    gpus = [line for line in lspci.splitlines() if re.search(r"\s03(00|02):\s", line)] if lspci else []
    xid = [line for line in text("xid_lines").splitlines() if line.strip()]
    return {"pci_gpu_count": len(gpus) if sections.get("lspci_gpus", {}).get("available") else None,
            "xid_line_count": len(xid), "xid_codes": sorted({int(m) for m in re.findall(r"Xid \([^)]*\): (\d+)",
                                                                                          "\n".join(xid))}),
            "uptime": text("uptime").strip() or None, "boot_id": text("boot_id").strip() or None,
            "machine_id": text("machine_id").strip() or None, "hostname": text("hostname").strip() or None,
            "nvidia_smi": bool(text("nvidia_smi_xml"))}


# -- reboot ------------------------------------------------------------------------------------------------------

async def _reboot(target: ssh.Target, *, incident_key: str = ""):
    """Reboot the host; records its boot id first so that `ssh_rebooted` can tell when it is back."""
    async with ssh.connect(target, timeout=settings.SSH_CONNECT_TIMEOUT_S) as connection:
        before = await ssh.run(connection, BOOT_ID_COMMAND, timeout=30)
        try:
            result = await ssh.run(connection, REBOOT_COMMAND, timeout=60)
        except ssh.SSHFailure as failure:
            # The connection dropping under a reboot is the reboot working.
            return True, f"reboot issued; the connection dropped ({failure.message})", None, \
                {"boot_id_before": before.stdout.strip()}
    if result.exit_status not in (0, None):
        return False, f"reboot refused (exit {result.exit_status}): {ssh.tail(result.stderr, 500).strip()}", \
            result.exit_status, {"boot_id_before": before.stdout.strip(), "stderr": ssh.tail(result.stderr)}
    return True, "reboot issued", result.exit_status, {"boot_id_before": before.stdout.strip()}


def ssh_rebooted(*, action: SSHAction) -> tuple[bool, str]:
    """Whether the host is back with another boot id than before the reboot (False while it is still down)."""
    before = (action.result or {}).get("boot_id_before", "")
    try:
        result = run_async(ssh.run_on(ssh_target(action.host), BOOT_ID_COMMAND, timeout=30,
                                      connect_timeout=settings.SSH_CONNECT_TIMEOUT_S))
    except ssh.SSHFailure as failure:
        if failure.code == ssh.HOST_KEY_CHANGED:
            ssh_host_failed(action.host, failure)
        return False, f"not back yet: {failure.message}"
    now = result.stdout.strip()
    if before and now and now != before:
        ssh_host_reached(action.host)
        return True, f"back after the reboot (boot id {before[:8]}… → {now[:8]}…)"
    return False, "still the boot from before the reboot"


# -- GPU reset ---------------------------------------------------------------------------------------------------

async def _gpu_reset(target: ssh.Target, *, gpu_index: int, incident_key: str = ""):
    """`nvidia-smi -r -i N`, only when no process runs on that GPU (a reset under a job kills the job)."""
    async with ssh.connect(target, timeout=settings.SSH_CONNECT_TIMEOUT_S) as connection:
        busy = await ssh.run(connection, "nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader"
                                         f" -i {gpu_index}", timeout=60)
        if busy.exit_status != 0:
            return False, f"cannot tell whether GPU {gpu_index} is idle: nvidia-smi exit {busy.exit_status} " \
                          f"{ssh.tail(busy.stderr or busy.stdout, 300).strip()}", busy.exit_status, {}
        processes = [line.strip() for line in busy.stdout.splitlines() if line.strip()]
        if processes:
            return False, f"GPU {gpu_index} is busy ({'; '.join(processes)[:300]}); not reset", None, \
                {"processes": processes}
        reset = await ssh.run(connection, SUDO + f"$SUDO nvidia-smi -r -i {gpu_index}", timeout=180)
    output = {"stdout": ssh.tail(reset.stdout), "stderr": ssh.tail(reset.stderr)}
    if reset.exit_status != 0:
        return False, f"nvidia-smi -r -i {gpu_index} failed (exit {reset.exit_status}): " \
                      f"{ssh.tail(reset.stderr or reset.stdout, 300).strip()}", reset.exit_status, output
    return True, f"GPU {gpu_index} reset", 0, output


# -- hooks -------------------------------------------------------------------------------------------------------

async def _run_hook(target: ssh.Target, *, name: str, timeout_s: float = 600, incident_key: str = ""):
    """Run `<hooks dir>/NAME` (installed by the operator on the host) as the login user; no arguments, the
    incident reaches it as an environment variable."""
    path = f"{hooks_dir().rstrip('/')}/{name}"
    command = (f"if [ ! -x {shlex.quote(path)} ]; then echo {shlex.quote('no executable hook ' + path)} >&2; "
               f"exit 127; fi; FLEET_HOOK={shlex.quote(name)} FLEET_INCIDENT={shlex.quote(incident_key)} "
               f"exec {shlex.quote(path)}")
    async with ssh.connect(target, timeout=settings.SSH_CONNECT_TIMEOUT_S) as connection:
        result = await ssh.run(connection, command, timeout=timeout_s)
    output = {"stdout": ssh.tail(result.stdout), "stderr": ssh.tail(result.stderr)}
    if result.exit_status != 0:
        return False, f"hook {name} failed (exit {result.exit_status}): " \
                      f"{ssh.tail(result.stderr or result.stdout, 300).strip()}", result.exit_status, output
    return True, f"hook {name} ran", 0, output


WORK = {SSHActionKind.DIAGNOSE: _diagnose, SSHActionKind.REBOOT: _reboot, SSHActionKind.GPU_RESET: _gpu_reset,
        SSHActionKind.RUN_HOOK: _run_hook}
