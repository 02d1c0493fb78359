"""The workflows and policies shipped with the product (seeded by migration 0002, version 1).

Workflows follow the responsible party of the finding, so the same Xid 79 leads to different work on different
delivery forms. Operators edit both through the API; these rows are only the starting point.
"""

from fleet_agent.xid import NODE_REMEDIATIONS_RMA_THRESHOLD

H = 3600
DAY = 86400
REPEAT_COUNT = NODE_REMEDIATIONS_RMA_THRESHOLD[0]  # ≥ 5 remediations (in the window intake counts) → RMA / replace


def step(kind: str, title: str = "", *, params: dict | None = None, timeout_s: int | None = None,
         on_failure: dict | None = None, requires_approval: bool = False) -> dict:
    return {"kind": kind, "title": title, "params": params or {}, "timeout_s": timeout_s,
            "requires_approval": requires_approval, "on_failure": on_failure or {"action": "wait"}}


CORDON = step("cordon", "Cordon the node", timeout_s=H)
DRAIN = step("drain", "Drain running work", timeout_s=4 * H)
EVIDENCE = step("collect_evidence", "Collect the evidence bundle", timeout_s=H,
                on_failure={"action": "retry", "max_attempts": 3, "backoff_s": 60})
VERIFY = step("verify", "Verify the node", timeout_s=6 * H)
RETURN = step("return_to_service", "Return to service", timeout_s=H)


def diagnostics(level: int, title: str, *, on_failure: dict | None = None, target: str | None = None) -> dict:
    """A DCGM diagnostic as a gate (NVIDIA's guidance: level 1 as a readiness check — at enrolment and after a
    reboot —, level 2 as the epilogue after a failed job, level 3 as the post-mortem — before an RMA closes). A
    failed test fails the step and its on_failure applies (default: stop and wait for an operator); the failed
    test also opens a `dcgm_diag_failed` finding naming it."""
    params = {"level": level, **({"target": target} if target else {})}
    return step("run_diagnostics", title, params=params, timeout_s={1: H, 2: 2 * H, 3: 4 * H}[level],
                on_failure=on_failure)


DIAG_AFTER_REBOOT = diagnostics(1, "DCGM diagnostics, level 1 (after the reboot)",
                                on_failure={"action": "escalate", "workflow": "owned-rma"})
DIAG_BEFORE_RMA_CLOSES = diagnostics(3, "DCGM diagnostics, level 3 (before closing the RMA)")
DIAG_REPLACEMENT = diagnostics(1, "DCGM diagnostics, level 1 (the replacement at enrolment)", target="replacement")

WORKFLOWS: list[dict] = [
    {"slug": "cloud-replace", "name": "Cloud instance: provider's hardware — replace the instance",
     "description": "Cloud (shared or dedicated), the provider's layer failed: take the instance out, tell the "
                    "provider with the evidence, get a replacement instance into the pool, verify it, retire the "
                    "old node.",
     "steps": [CORDON, DRAIN, EVIDENCE,
               step("open_ticket", "Ticket to the provider", timeout_s=4 * H,
                    params={"party": "provider", "ask": "a look at the host; we are replacing the instance"}),
               step("request_replacement", "Request a replacement instance", timeout_s=2 * H,
                    params={"same_pool": True}),
               DIAG_REPLACEMENT,
               step("verify", "Verify the replacement", timeout_s=6 * H, params={"target": "replacement"}),
               step("retire", "Retire the old node", timeout_s=H)]},
    {"slug": "spot-reclaim", "name": "Spot interruption: checkpoint, drain, replace",
     "description": "A spot or preemptible node got its interruption notice: checkpoint now, drain before the "
                    "deadline, record the reclaim and request a replacement in the same pool. Urgent: not held by "
                    "the concurrency limit or maintenance windows (the capacity is going away anyway).",
     "urgent": True,
     "steps": [step("checkpoint", "Checkpoint now", timeout_s=120, params={"before_notice_deadline": True},
                    on_failure={"action": "continue"}),
               step("drain", "Drain before the deadline", timeout_s=120, params={"before_notice_deadline": True},
                    on_failure={"action": "continue"}),
               step("record_reclaim", "Record the reclaim"),
               step("request_replacement", "Request a replacement in the same pool", timeout_s=2 * H,
                    params={"same_pool": True}),
               DIAG_REPLACEMENT,
               step("verify", "Verify the replacement", timeout_s=6 * H, params={"target": "replacement"})]},
    {"slug": "hosted-hardware-ticket", "name": "Hosted bare metal: provider's hardware — hardware ticket",
     "description": "Bare metal hosted by a provider, hardware layer: take the server out, open a hardware ticket "
                    "with the evidence, wait for the provider, verify, return.",
     "steps": [CORDON, DRAIN, EVIDENCE,
               step("open_ticket", "Hardware ticket to the provider", timeout_s=4 * H,
                    params={"party": "provider",
                            "ask": "on-site inspection; swap the part or the server if it repeats"}),
               step("await_external", "Wait for the provider's repair", timeout_s=3 * DAY,
                    params={"waiting_on": "provider", "until": "operator"}),
               DIAG_BEFORE_RMA_CLOSES, VERIFY, RETURN]},
    {"slug": "hosted-replace", "name": "Hosted bare metal: repeat offender — ask for a replacement server",
     "description": "A hosted server remediated 5 times in 7 days: ask the provider to replace it.",
     "steps": [CORDON, DRAIN, EVIDENCE,
               step("open_ticket", "Replacement request to the provider", timeout_s=4 * H,
                    params={"party": "provider", "ask": "a replacement server (5 remediations in 7 days)"}),
               step("await_external", "Wait for the replacement server", timeout_s=7 * DAY,
                    params={"waiting_on": "provider", "until": "operator"}),
               diagnostics(1, "DCGM diagnostics, level 1 (the replacement server)"), VERIFY, RETURN]},
    {"slug": "owned-gpu-reset", "name": "Own metal: GPU fault — reset the GPU first",
     "description": "Our own server, a GPU-level fault whose first action is a reset: reset the GPU; if the "
                    "node does not verify, escalate to a reboot.",
     "steps": [CORDON, DRAIN, EVIDENCE,
               step("reset_gpu", "Reset the GPU", timeout_s=H,
                    on_failure={"action": "escalate", "workflow": "owned-reboot"}),
               diagnostics(1, "DCGM diagnostics, level 1 (after the reset)",
                           on_failure={"action": "escalate", "workflow": "owned-reboot"}),
               step("verify", "Verify the node", timeout_s=6 * H,
                    on_failure={"action": "escalate", "workflow": "owned-reboot"}),
               RETURN]},
    {"slug": "owned-reboot", "name": "Own metal: reboot, then RMA",
     "description": "Our own server: reboot; if the node does not verify, escalate to an RMA. An Xid that comes "
                    "back after 2 reboots opens an Xid-escalation finding, which the RMA workflow takes.",
     "steps": [CORDON, DRAIN, EVIDENCE,
               step("reboot", "Reboot", timeout_s=H, on_failure={"action": "escalate", "workflow": "owned-rma"}),
               DIAG_AFTER_REBOOT,
               step("verify", "Verify the node", timeout_s=6 * H,
                    on_failure={"action": "escalate", "workflow": "owned-rma"}),
               RETURN]},
    {"slug": "owned-rma", "name": "Own metal: RMA the part with the vendor",
     "description": "A part swap with the hardware vendor, tracked by GPU serial and closed when the node reports "
                    "a new serial; then verify and return.",
     "steps": [CORDON, DRAIN, EVIDENCE,
               step("rma", "RMA with the vendor", timeout_s=DAY),
               step("await_external", "Wait for the part swap", timeout_s=14 * DAY,
                    params={"waiting_on": "vendor", "until": "gpu_serial_changed"}),
               DIAG_BEFORE_RMA_CLOSES, VERIFY, RETURN]},
    {"slug": "software-rollback", "name": "Our software layers: roll back to the pool baseline",
     "description": "Driver / CUDA / framework drift or mismatch on our side: cordon, roll the stack back to the "
                    "pool baseline (or hand it to the platform team), verify, return.",
     "steps": [CORDON,
               step("rollback_stack", "Roll back to the baseline", timeout_s=4 * H, params={"to": "baseline"}),
               VERIFY, RETURN]},
    {"slug": "mass-failure", "name": "Mass failure: one incident for the provider or facility",
     "description": "Opened by a circuit breaker instead of one replacement per node. Automation stays paused "
                    "for the pool or site until an operator completes the last step (or cancels the incident).",
     "steps": [step("collect_evidence", "Collect the evidence"),
               step("open_ticket", "Ticket to the provider or facility", timeout_s=2 * H,
                    params={"party": "provider", "ask": "an explanation of the mass failure and an ETA"}),
               step("await_external", "Wait, then close the breaker", params={"waiting_on": "operator",
                                                                               "until": "operator"})]},
    {"slug": "operator-cordon", "name": "Operator: cordon", "description": "Opened from the node page.",
     "steps": [CORDON]},
    {"slug": "operator-drain", "name": "Operator: cordon and drain", "description": "Opened from the node page.",
     "steps": [CORDON, DRAIN]},
    {"slug": "operator-reboot", "name": "Operator: reboot", "description": "Opened from the node page.",
     "steps": [CORDON, DRAIN, step("reboot", "Reboot", timeout_s=H),
               diagnostics(1, "DCGM diagnostics, level 1 (after the reboot)"), VERIFY, RETURN]},
    {"slug": "operator-replace", "name": "Operator: replace the node", "description": "Opened from the node page.",
     "steps": [CORDON, DRAIN,
               step("request_replacement", "Request a replacement", timeout_s=2 * H, params={"same_pool": True}),
               DIAG_REPLACEMENT,
               step("verify", "Verify the replacement", timeout_s=6 * H, params={"target": "replacement"}),
               step("retire", "Retire the old node", timeout_s=H)]},
    {"slug": "job-failed-diagnostics", "name": "After a failed job: DCGM diagnostics level 2",
     "description": "A job failed on the node (a scheduler epilogue, or an operator, opens this: POST "
                    "/api/v1/incidents/ with this workflow): cordon, drain, run DCGM's level-2 diagnostic; a pass "
                    "returns the node to service, a failed test stops here with the node cordoned (and opens a "
                    "dcgm_diag_failed finding, whose own workflow takes over once this incident is closed).",
     "steps": [CORDON, DRAIN, diagnostics(2, "DCGM diagnostics, level 2 (after the failed job)"), RETURN]},
    {"slug": "enrolment-diagnostics", "name": "New node: DCGM diagnostics level 1 before it takes work",
     "description": "For a node that just enrolled (opened by hand or by provisioning through the API): cordon, run "
                    "DCGM's level-1 diagnostic, verify, return to service.",
     "steps": [CORDON, diagnostics(1, "DCGM diagnostics, level 1 (at enrolment)"), VERIFY, RETURN]},
]

CLOUD = ["cloud_shared", "cloud_dedicated"]
POLICIES: list[dict] = [
    {"priority": 10, "name": "Interruption notice → spot reclaim", "rules": ["preemption_notice"],
     "workflow": "spot-reclaim"},
    {"priority": 20, "name": "Own metal, 5 remediations in 7 days → RMA", "min_recent_remediations": REPEAT_COUNT,
     "delivery_forms": ["bare_metal_owned"], "layers": ["hardware"], "severities": ["critical"],
     "workflow": "owned-rma"},
    {"priority": 21, "name": "Cloud, 5 remediations in 7 days → replace", "min_recent_remediations": REPEAT_COUNT,
     "delivery_forms": CLOUD, "layers": ["hardware"], "severities": ["critical"], "workflow": "cloud-replace"},
    {"priority": 22, "name": "Hosted metal, 5 remediations in 7 days → replacement server",
     "min_recent_remediations": REPEAT_COUNT, "delivery_forms": ["bare_metal_hosted"], "layers": ["hardware"],
     "severities": ["critical"], "workflow": "hosted-replace"},
    {"priority": 30, "name": "Own metal, Xid escalation → RMA", "rules": ["xid_escalation"],
     "delivery_forms": ["bare_metal_owned"], "workflow": "owned-rma"},
    {"priority": 40, "name": "Cloud, provider's hardware → replace the instance", "delivery_forms": CLOUD,
     "layers": ["hardware"], "parties": ["provider"], "severities": ["critical"], "workflow": "cloud-replace"},
    {"priority": 50, "name": "Hosted metal, provider's hardware → hardware ticket",
     "delivery_forms": ["bare_metal_hosted"], "layers": ["hardware", "facility"], "parties": ["provider"],
     "severities": ["critical"], "workflow": "hosted-hardware-ticket"},
    {"priority": 60, "name": "Own metal, Xid whose first action is a GPU reset → reset",
     "delivery_forms": ["bare_metal_owned"], "xid_actions": ["reset_gpu"], "parties": ["hardware_vendor"],
     "severities": ["critical"], "workflow": "owned-gpu-reset"},
    {"priority": 70, "name": "Own metal, hardware fault → reboot, then RMA", "delivery_forms": ["bare_metal_owned"],
     "layers": ["hardware"], "parties": ["hardware_vendor"], "severities": ["critical"], "workflow": "owned-reboot"},
    {"priority": 80, "name": "Our driver / CUDA / framework → roll back to the baseline",
     "rules": ["stack_drift", "cuda_driver_too_old", "arch_not_supported"],
     "layers": ["gpu_driver", "cuda_runtime", "framework"], "parties": ["us"], "workflow": "software-rollback"},
]


def seed_workflows(Workflow) -> None:  # noqa: N803 - a model class, historical in migrations
    for data in WORKFLOWS:
        Workflow.objects.get_or_create(slug=data["slug"], defaults={
            "name": data["name"], "description": data.get("description", ""), "steps": data["steps"],
            "urgent": data.get("urgent", False), "built_in": True, "version": 1})


def seed_policies(RemediationPolicy, Workflow) -> None:  # noqa: N803
    if RemediationPolicy.objects.exists():
        return
    workflows = {w.slug: w for w in Workflow.objects.all()}
    for data in POLICIES:
        fields = {k: v for k, v in data.items() if k != "workflow"}
        RemediationPolicy.objects.create(workflow=workflows[data["workflow"]], changed_in_version=1, **fields)


def add_diagnostic_gates(Workflow) -> None:  # noqa: N803
    """Migration 0003: the DCGM diagnostic gates go into the shipped workflows an operator never edited (built in,
    still version 1, no run_diagnostics step yet); new workflows are created. Edited ones are left alone."""
    seed_workflows(Workflow)
    shipped = {data["slug"]: data for data in WORKFLOWS}
    for workflow in Workflow.objects.filter(built_in=True, version=1, slug__in=list(shipped)):
        new_steps = shipped[workflow.slug]["steps"]
        if any(s.get("kind") == "run_diagnostics" for s in workflow.steps or []) or \
                not any(s.get("kind") == "run_diagnostics" for s in new_steps):
            continue
        workflow.steps = new_steps
        workflow.version = 2
        workflow.save(update_fields=["steps", "version"])


def seed_remediation(Workflow, RemediationPolicy) -> None:  # noqa: N803
    seed_workflows(Workflow)
    seed_policies(RemediationPolicy, Workflow)
