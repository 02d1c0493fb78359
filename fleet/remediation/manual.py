"""The built-in `manual` executor: every step kind as a runbook step an operator carries out and then marks done
(or failed) through the API. It stays useful after automation lands, for sites without it."""

from __future__ import annotations

from collections import defaultdict

from .choices import StepKind, WaitingOn
from .executors import MANUAL
from .steps import StepContext, StepOutcome

RUNBOOKS: dict[str, str] = {
    StepKind.CORDON: "Cordon {hostname} in your scheduler so no new work lands on it (Slurm: scontrol update "
                     "NodeName={hostname} State=DRAIN Reason=\"fleet {incident_key}\"; Kubernetes: kubectl cordon "
                     "{hostname}). Mark this step done when it is cordoned.",
    StepKind.DRAIN: "Drain {hostname}: let running jobs finish or move them (checkpoint first), then confirm no job "
                    "is left on it. Mark done when it is empty.",
    StepKind.CHECKPOINT: "Trigger an immediate checkpoint of the jobs on {hostname} (the node is about to be "
                         "reclaimed{deadline_text}). Mark done when the checkpoint is written.",
    StepKind.COLLECT_EVIDENCE: "The control plane attached its evidence bundle for {hostname}.",
    StepKind.RESET_GPU: "Reset GPU {gpu_index} (serial {gpu_serial}) on {hostname} once no process uses it: "
                        "sudo nvidia-smi -r -i {gpu_index}. Mark done when the reset succeeded, failed if it did not.",
    StepKind.REBOOT: "Reboot {hostname} (sudo systemctl reboot) and wait for its agent to report again. Mark done "
                     "once it is back.",
    StepKind.ROLLBACK_STACK: "Roll {hostname}'s software stack back to the pool baseline ({baseline_text}), or hand "
                             "it to the platform team. Mark done when the node runs the baseline.",
    StepKind.OPEN_TICKET: "Open a ticket with {ticket_party} for {hostname} ({instance_text}): {finding}. Attach "
                          "the evidence bundle ({evidence_url}) and ask for {ask}. Mark done with the ticket "
                          "number in the note.",
    StepKind.AWAIT_EXTERNAL: "Wait for {waiting_party} ({until_text}). Mark done when they have finished, failed "
                             "if they cannot help.",
    StepKind.REQUEST_REPLACEMENT: "Request a replacement for {hostname} in pool {pool} ({instance_text}) and enrol "
                                  "it into the same pool; it is linked to this incident when its agent enrols. Mark "
                                  "done once the replacement is requested.",
    StepKind.RECORD_RECLAIM: "The reclaim of {hostname} is recorded.",
    StepKind.RMA: "Open an RMA with the hardware vendor for GPU {gpu_index} of {hostname} (serial {gpu_serial}, "
                  "UUID {gpu_uuid}); attach the evidence bundle ({evidence_url}). Mark done once the RMA is filed.",
    StepKind.VERIFY: "Run `fleet-agent verify` on {verify_host}; mark done if every check passes, failed if one "
                     "does not. The control plane then checks the stack against the baseline and that no critical "
                     "finding has been open for the quiet period.",
    StepKind.RUN_DIAGNOSTICS: "Run DCGM's diagnostic at level {diag_level} on {verify_host} with nothing else on its "
                              "GPUs: `fleet-agent verify --level {diag_level}` (it runs dcgmi diag -r {diag_level} "
                              "-j and its agent reports the result). Mark done if every test passed, failed if one "
                              "failed — a failed test also opens a dcgm_diag_failed finding naming it.",
    StepKind.RETURN_TO_SERVICE: "Return {hostname} to service in your scheduler (Slurm: scontrol update "
                                "NodeName={hostname} State=RESUME; Kubernetes: kubectl uncordon {hostname}). Mark "
                                "done when it takes work again.",
    StepKind.TERMINATE: "Terminate instance {instance_id} ({hostname}) with {provider}. Mark done when it is gone.",
    StepKind.RETIRE: "Retire {hostname}: take it out of the scheduler for good and stop its agent. Mark done when "
                     "it is out.",
}

# Kinds the control plane finishes by itself: nothing for a person to do.
SELF_COMPLETING = frozenset({StepKind.COLLECT_EVIDENCE, StepKind.RECORD_RECLAIM})

PARTY_WAITING = {"provider": WaitingOn.PROVIDER, "vendor": WaitingOn.VENDOR, "hardware_vendor": WaitingOn.VENDOR,
                 "us": WaitingOn.PLATFORM_TEAM, "platform_team": WaitingOn.PLATFORM_TEAM,
                 "operator": WaitingOn.OPERATOR}
UNTIL_TEXT = {"gpu_serial_changed": "this step completes by itself when the node reports a new serial for GPU "
                                    "{gpu_index}",
              "operator": "an operator confirms"}


def runbook(ctx: StepContext) -> str:
    facts = defaultdict(lambda: "?", {k: ("?" if v in (None, "") else v) for k, v in ctx.facts.items()})
    params = ctx.params
    party = params.get("party") or facts.get("responsible_party") or "provider"
    facts["ticket_party"] = facts["provider"] if party == "provider" else (
        "the hardware vendor" if party in ("vendor", "hardware_vendor") else "our platform team")
    facts["waiting_party"] = {"provider": facts["provider"], "vendor": "the hardware vendor",
                              "operator": "an operator"}.get(params.get("waiting_on", "provider"),
                                                            params.get("waiting_on", "provider"))
    facts["ask"] = params.get("ask") or "inspection and repair"
    until = params.get("until", "operator")
    facts["until_text"] = UNTIL_TEXT.get(until, until).format_map(facts)
    facts["verify_host"] = facts["replacement_hostname"] if params.get("target") == "replacement" else \
        facts["hostname"]
    facts["diag_level"] = params.get("level", 1)
    instance = [facts["instance_id"]] if facts["instance_id"] != "?" else []
    facts["instance_text"] = ", ".join([*instance, f"region {facts['region']}"]) if instance else \
        f"site {facts['site']}"
    baseline = ctx.facts.get("baseline") or {}
    facts["baseline_text"] = ", ".join(f"{k} {v}" for k, v in baseline.items() if v) or "no baseline pinned"
    deadline = ctx.facts.get("notice_deadline")
    facts["deadline_text"] = f" at {deadline}" if deadline else ""
    return RUNBOOKS.get(ctx.kind, "Carry out '{kind}' on {hostname} and mark it done.").format_map(
        facts | {"kind": ctx.kind})


class ManualExecutor:
    name = MANUAL
    kinds = frozenset(StepKind.values)

    def start(self, ctx: StepContext) -> StepOutcome:
        text = runbook(ctx)
        if ctx.dry_run:
            return StepOutcome.done(f"dry run: would ask an operator to: {text}", runbook=text)
        if ctx.kind in SELF_COMPLETING:
            return StepOutcome.done(text)
        return StepOutcome.waiting(text, waiting_on=_waiting_on(ctx), runbook=text)

    def poll(self, ctx: StepContext) -> StepOutcome:
        # Asked again, the answer is the same: still waiting on whoever the start said (a poll that said
        # "operator" here turned a wait on the provider into one on us at the first poll).
        text = runbook(ctx)
        return StepOutcome.waiting(text, waiting_on=_waiting_on(ctx), runbook=text)


def _waiting_on(ctx: StepContext) -> str:
    if ctx.kind == StepKind.AWAIT_EXTERNAL:
        return PARTY_WAITING.get(ctx.params.get("waiting_on", "provider"), WaitingOn.PROVIDER)
    return WaitingOn.OPERATOR
