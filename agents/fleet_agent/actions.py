"""Actions the control plane asks for in the answer to a report; the node decides and runs them.

* Nothing runs unless this node's own config allows its kind (``[actions] allow = [...]``; empty by default):
  the server can ask, only the node's operator can permit.
* Every action is checked before anything else: the signature (HMAC keyed by the SHA-256 of this node's
  credential: a tampered or foreign action fails it), the node id, a known kind, strict parameters, the
  not-after time. What fails is refused, and the refusal is reported like any outcome.
* Each action id is recorded in the spool before it runs, so it runs at most once, across restarts too. An
  action that was running when the agent stopped is reported ``interrupted`` and never re-run; a reboot whose
  boot id changed meanwhile is reported done.
* Outcomes (result, exit status, stdout/stderr tails, duration, and for ``collect_evidence`` what was readable)
  wait in the spool and ride the next report.

The agent stays unprivileged: ``reboot`` and ``gpu_reset`` run through the narrow sudoers rule that
``install.sh --allow-actions`` writes, and nothing else gets root.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import queue
import re
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from fleet_agent.protocol import (
    ACTION_KINDS,
    DIAG_LEVELS,
    HOOK_NAME_PATTERN,
    MAX_GPU_INDEX,
    action_signature,
    action_signing_key,
)
from fleet_agent.spool import Spool
from fleet_agent.timeutil import rfc3339, utc_now

log = logging.getLogger(__name__)

TAIL_CHARS = 8000
EVIDENCE_CHARS = 256 * 1024
COMMAND_TIMEOUT_S = 120.0
_ID = re.compile(r"^[A-Za-z0-9-]{1,64}$")
_HOOK = re.compile(HOOK_NAME_PATTERN)


@dataclass(frozen=True)
class Identity:
    """What an action is checked against: this node's id and the key derived from its credential."""

    node_id: int | None
    key: bytes


@dataclass(frozen=True)
class CommandOutcome:
    exit_status: int | None
    stdout: str
    stderr: str


def run(argv: list[str], *, timeout: float = COMMAND_TIMEOUT_S, env: dict | None = None) -> CommandOutcome:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout,
                              env=env, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return CommandOutcome(127, "", f"{argv[0]}: not found")
    except PermissionError as err:
        return CommandOutcome(126, "", f"{argv[0]}: {err}")
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
        return CommandOutcome(None, out, f"timed out after {timeout:.0f} s")
    return CommandOutcome(done.returncode, done.stdout, done.stderr)


def tail(text: str, limit: int = TAIL_CHARS) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def read_boot_id(proc_root: str = "/proc") -> str:
    try:
        return Path(proc_root, "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


class ActionRunner:
    """Checks, records and runs actions one at a time on its own thread; ``on_result`` after each outcome."""

    def __init__(
        self,
        *,
        spool: Spool,
        identity: Callable[[], Identity | None],
        allow: list[str],
        hooks_dir: str,
        reboot_command: list[str],
        gpu_reset_command: list[str],
        nvidia_smi: str = "nvidia-smi",
        verify: Callable[[], tuple[bool, str]] | None = None,
        diagnose: Callable[[int], Any] | None = None,
        boot_id: Callable[[], str] = read_boot_id,
        on_result: Callable[[], None] | None = None,
        command: Callable[..., CommandOutcome] = run,
        clock: Callable[[], datetime] = utc_now,
    ):
        self.spool = spool
        self._identity = identity
        self.allow = list(allow)
        self.hooks_dir = hooks_dir
        self.reboot_command = list(reboot_command)
        self.gpu_reset_command = list(gpu_reset_command)
        self.nvidia_smi = nvidia_smi
        self._verify = verify
        self._diagnose = diagnose
        self._boot_id = boot_id
        self._on_result = on_result
        self._command = command
        self._clock = clock
        self._queue: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- arrival ---------------------------------------------------------------------------------------

    def receive(self, actions: Any) -> int:
        """Check and record what the answer to a report carried; returns how many were queued to run."""
        if not isinstance(actions, list):
            return 0
        queued = 0
        identity = self._identity()
        for action in actions[:100]:
            if not isinstance(action, dict):
                continue
            action_id = action.get("id")
            if not isinstance(action_id, str) or not _ID.match(action_id):
                log.warning("ignored an action without a usable id: %.200r", action)
                continue
            if self.spool.action_known(action_id):
                continue  # claimed before (maybe before a restart): never run twice
            kind = str(action.get("kind") or "")[:64]
            refusal = self._check(action, identity)
            if refusal is not None:
                result, message = refusal
                log.warning("action %s (%s) %s: %s", action_id, kind, result, message)
                self._record(action_id, kind, result, message)
                continue
            if self.spool.action_claim(action_id, kind, action, boot_id=self._boot_id()):
                self._queue.put(action)
                queued += 1
        return queued

    def _check(self, action: dict, identity: Identity | None) -> tuple[str, str] | None:
        """None when the action may run; otherwise (result, why): ``refused`` or ``expired``."""
        if identity is None:
            return "refused", "this node is not enrolled, so it cannot check the action's signature"
        signature = action.get("signature")
        if not isinstance(signature, str) or not hmac.compare_digest(signature, action_signature(identity.key,
                                                                                                 action)):
            return "refused", "the signature does not match: the action was altered or is not for this node"
        if identity.node_id is not None and action.get("node_id") != identity.node_id:
            return "refused", f"the action is for node {action.get('node_id')}, this is node {identity.node_id}"
        kind = action.get("kind")
        if kind not in ACTION_KINDS:
            return "refused", f"unknown action kind {str(kind)[:64]!r}; this agent knows {', '.join(ACTION_KINDS)}"
        problem = self._params_problem(kind, action.get("params"))
        if problem:
            return "refused", f"bad parameters: {problem}"
        if not self.allowed(kind, action["params"]):
            return "refused", (f"{kind} is not allowed on this node (its [actions] allow is "
                               f"{self.allow or 'empty'}); an operator must carry it out")
        deadline = _parse_time(action.get("not_after"))
        if deadline is None:
            return "refused", "no usable not_after time"
        if deadline <= self._clock():
            return "expired", f"arrived after its not-after time {action.get('not_after')}"
        return None

    @staticmethod
    def _params_problem(kind: str, params: Any) -> str:
        if not isinstance(params, dict):
            return "params is not an object"
        expected = {"gpu_reset": {"gpu_index"}, "run_hook": {"name", "timeout_s"},
                    "dcgm_diag": {"level"}}.get(kind, set())
        extra = sorted(set(params) - expected)
        if extra:
            return f"{kind} takes no {', '.join(extra)}"
        if kind == "gpu_reset":
            index = params.get("gpu_index")
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= MAX_GPU_INDEX:
                return f"gpu_index must be a whole number from 0 to {MAX_GPU_INDEX}"
        if kind == "dcgm_diag":
            level = params.get("level")
            if isinstance(level, bool) or level not in DIAG_LEVELS:
                return f"level must be one of {', '.join(map(str, DIAG_LEVELS))}"
        if kind == "run_hook":
            name = params.get("name")
            if not isinstance(name, str) or not _HOOK.match(name):
                return "a hook name is letters, digits, '.', '_' and '-' (no path)"
            timeout = params.get("timeout_s", 600)
            if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 3600:
                return "timeout_s must be 1 to 3600"
        return ""

    def allowed(self, kind: str, params: dict) -> bool:
        if kind == "run_hook":
            return "run_hook" in self.allow or f"run_hook:{params.get('name')}" in self.allow
        return kind in self.allow

    # -- recovery after a restart --------------------------------------------------------------------

    def recover(self) -> None:
        """Settle what a previous run of the agent left: re-queue actions that never started (they have not run),
        and report the ones that were running as interrupted, never running them again."""
        for action_id, kind, _body, boot_id in self.spool.actions_in_state("running"):
            if kind == "reboot" and boot_id and self._boot_id() not in ("", boot_id):
                self._record(action_id, kind, "done", "the node rebooted (boot id changed) while the action ran",
                             exit_status=0)
            else:
                self._record(action_id, kind, "interrupted", "the agent stopped while this action ran; it is not run "
                             "again (check the node)")
        for _, _, body, _ in self.spool.actions_in_state("queued"):
            self._queue.put(body)
        self.spool.actions_prune()

    # -- running -------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="fleet-agent-actions", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            action = self._queue.get()
            if action is None:
                break
            try:
                self.run_one(action)
            except Exception:  # noqa: BLE001 - one action's surprise must not stop the next
                log.exception("action %s failed unexpectedly", action.get("id"))

    def run_one(self, action: dict) -> None:
        action_id, kind = action["id"], action["kind"]
        deadline = _parse_time(action.get("not_after"))
        if deadline is not None and deadline <= self._clock():
            self._record(action_id, kind, "expired", "its not-after time passed before it could start")
            return
        if not self.spool.action_start(action_id):
            return  # started before (by an earlier run of this agent): never twice
        started, clock_started = self._clock(), time.monotonic()
        log.warning("running action %s: %s %s (%s)", action_id, kind, action.get("params") or "",
                    action.get("reason") or "no reason given")
        handler = getattr(self, f"_do_{kind}")
        ok, message, outcome, evidence = handler(action["params"], action)
        self._record(action_id, kind, "done" if ok else "failed", message,
                     exit_status=outcome.exit_status if outcome else (0 if ok else None),
                     stdout=outcome.stdout if outcome else "", stderr=outcome.stderr if outcome else "",
                     started=started, duration=time.monotonic() - clock_started, evidence=evidence)

    def _record(self, action_id: str, kind: str, result: str, message: str, *, exit_status: int | None = None,
                stdout: str = "", stderr: str = "", started: datetime | None = None, duration: float | None = None,
                evidence: dict | None = None) -> None:
        body = {"id": action_id, "kind": kind, "result": result, "exit_status": exit_status,
                "message": message[:4000], "stdout_tail": tail(stdout), "stderr_tail": tail(stderr),
                "duration_s": round(duration, 3) if duration is not None else None,
                "started_at": rfc3339(started) if started else None, "finished_at": rfc3339(self._clock())}
        if evidence is not None:
            body["evidence"] = evidence
        self.spool.action_finish(action_id, kind, body)
        if self._on_result is not None:
            try:
                self._on_result()
            except Exception:  # noqa: BLE001
                log.exception("reporting an action outcome failed; it goes with the next report")

    # -- the kinds -----------------------------------------------------------------------------------

    def _do_collect_evidence(self, params: dict, action: dict):
        probes = {
            "nvidia_smi_xml": [self.nvidia_smi, "-q", "-x"],
            "kernel_log": ["journalctl", "-k", "-n", "300", "--no-pager", "-o", "short-iso"],
        }
        evidence: dict[str, str] = {}
        notes = []
        for name, argv in probes.items():
            outcome = self._command(argv, timeout=60)
            if name == "kernel_log" and (outcome.exit_status != 0 or not outcome.stdout.strip()):
                outcome = self._command(["dmesg", "-T"], timeout=60)
            if outcome.exit_status == 0 and outcome.stdout.strip():
                evidence[name] = tail(outcome.stdout, EVIDENCE_CHARS)
            else:
                notes.append(f"{name}: {tail(outcome.stderr.strip(), 200) or 'exit ' + str(outcome.exit_status)}")
        kernel = evidence.get("kernel_log", "")
        xid = [line for line in kernel.splitlines() if "NVRM: Xid" in line or "NVRM: SXid" in line]
        if xid:
            evidence["xid_lines"] = tail("\n".join(xid), 64 * 1024)
        readable = ", ".join(evidence) or "nothing"
        message = f"collected {readable}" + (f"; not readable: {'; '.join(notes)}" if notes else "")
        return bool(evidence), message, None, evidence

    def _do_verify(self, params: dict, action: dict):
        if self._verify is None:
            return False, "this agent cannot run its smoke test here", None, None
        ok, table = self._verify()
        return ok, "every check passed" if ok else "a check failed (see stdout)", \
            CommandOutcome(0 if ok else 1, table, ""), None

    def _do_dcgm_diag(self, params: dict, action: dict):
        """``dcgmi diag -r LEVEL -j``: done when it passed, failed when a test failed or it gave no verdict. Where DCGM
        is not installed the action is done with outcome ``unavailable`` in its evidence, so a workflow gate can
        tell "passed" from "could not be run" (fleet_agent.dcgm)."""
        if self._diagnose is None:
            return False, "this agent cannot run DCGM diagnostics here", None, None
        run = self._diagnose(params["level"])
        evidence = {"dcgm_diag_outcome": run.outcome, "dcgm_diag_level": str(run.level),
                    "dcgm_diag_summary": json.dumps(run.summary, separators=(",", ":"))}
        if run.stdout.strip():
            evidence["dcgm_diag_json"] = tail(run.stdout, EVIDENCE_CHARS)
        outcome = CommandOutcome(run.exit_status, run.stdout, run.stderr)
        return run.outcome in ("pass", "unavailable"), run.message, outcome, evidence

    def _do_gpu_reset(self, params: dict, action: dict):
        index = params["gpu_index"]
        busy = self._command([self.nvidia_smi, "--query-compute-apps=pid,process_name", "--format=csv,noheader",
                              "-i", str(index)], timeout=60)
        if busy.exit_status != 0:
            return False, f"cannot tell whether GPU {index} is idle: {tail(busy.stderr.strip(), 300)}", busy, None
        processes = [line.strip() for line in busy.stdout.splitlines() if line.strip()]
        if processes:
            return False, f"GPU {index} is busy ({'; '.join(processes)[:300]}); not reset", busy, None
        argv = [part.replace("{gpu}", str(index)) for part in self.gpu_reset_command]
        outcome = self._command(argv, timeout=180)
        if outcome.exit_status != 0:
            return False, f"{' '.join(argv)} failed (exit {outcome.exit_status})", outcome, None
        return True, f"GPU {index} reset", outcome, None

    def _do_reboot(self, params: dict, action: dict):
        outcome = self._command(self.reboot_command, timeout=60)
        if outcome.exit_status != 0:
            return False, f"{' '.join(self.reboot_command)} failed (exit {outcome.exit_status})", outcome, None
        return True, "reboot requested", outcome, None

    def _do_run_hook(self, params: dict, action: dict):
        name = params["name"]
        directory = os.path.realpath(self.hooks_dir)
        path = os.path.realpath(os.path.join(directory, name))
        if os.path.dirname(path) != directory:
            return False, f"hook {name} resolves outside {self.hooks_dir}; not run", None, None
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            return False, f"no executable hook {name} in {self.hooks_dir}", CommandOutcome(127, "", ""), None
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FLEET_ACTION_ID": action["id"], "FLEET_HOOK": name,
               "FLEET_INCIDENT": str(action.get("reason") or "")}
        outcome = self._command([path], timeout=params.get("timeout_s", 600), env=env)
        if outcome.exit_status != 0:
            return False, f"hook {name} failed (exit {outcome.exit_status})", outcome, None
        return True, f"hook {name} ran", outcome, None


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def identity_from_enrollment(enrollment) -> Identity | None:
    if enrollment is None or not enrollment.credential:
        return None
    return Identity(enrollment.node_id, action_signing_key(enrollment.credential))
