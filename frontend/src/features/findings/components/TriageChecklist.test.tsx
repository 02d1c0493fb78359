import { render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { FindingDetail, Triage } from "../types/findings";
import { fakeApi, renderWithProviders } from "@/testing/render";
import { TriageChecklist, TriageChecklistView, orderedSteps } from "./TriageChecklist";

const finding = {
  id: 11, rule: "cuda_driver_too_old", rule_title: "Framework needs a newer CUDA", node: 7, hostname: "gpu-7", pool: null,
  provider: 1, provider_name: "AWS", provider_support_contact: "",
  gpu: null, gpu_index: null, subject: "node", state: "open", step: "software_chain", step_number: 2, layer: "gpu_driver",
  severity: "critical", summary: "CUDA 12.4 build on a CUDA 12.2 driver", responsible_party: "us",
  responsibility_source: "default", action_kind: "internal_fix", recommended_action: "Upgrade the driver to ≥ 550.",
  xid_policy_version: null, first_seen: "2026-01-01T00:00:00Z", opened_at: "2026-01-01T00:00:30Z",
  last_seen: "2026-01-01T00:05:00Z", resolved_at: null, resolution: "", updated_at: "2026-01-01T00:00:00Z",
  evidence: { driver_version: "535.54", torch_cuda: "12.4" },
} satisfies FindingDetail;

const step = (name: Triage["steps"][number]["step"], number: number, status: Triage["steps"][number]["status"], findings: FindingDetail[] = []) =>
  ({ step: name, number, title: name, status, reason: "", findings, pending: [] });

const triage: Triage = {
  node: 7, hostname: "gpu-7", generated_at: "2026-01-01T00:05:00Z", last_report_at: "2026-01-01T00:05:00Z", fresh: true,
  headline: "Step 2 — driver 535.54 supports CUDA ≤ 12.2, torch 2.4 was built for CUDA 12.4",
  headline_finding: null,
  steps: [
    step("platform_hardware", 4, "unknown"),
    step("software_chain", 2, "failed", [finding]),
    step("visibility", 1, "passed"),
  ],
  consequences: [],
};

describe("TriageChecklist", () => {
  it("marks a finding another finding explains as its consequence, without its own next step", () => {
    const lost = { ...finding, id: 12, rule: "gpu_lost", step: "visibility", summary: "GPU 5 is lost",
      recommended_action: "Open a ticket." } satisfies FindingDetail;
    const notice = { ...finding, id: 13, rule: "preemption_notice", step: "platform_hardware",
      summary: "The cloud announced terminate of this instance" } satisfies FindingDetail;
    render(<TriageChecklistView triage={{
      ...triage,
      steps: [step("visibility", 1, "failed", [lost]), step("platform_hardware", 4, "failed", [notice])],
      consequences: [{ finding: 12, rule: "gpu_lost", summary: "GPU 5 is lost", explained_by: 13,
        explained_by_rule: "preemption_notice", root_cause: 13 }],
    }} />);
    expect(screen.getByText("Consequence of: The cloud announced terminate of this instance")).toBeInTheDocument();
    expect(screen.queryByText(/Open a ticket/)).not.toBeInTheDocument();
  });

  it("puts the steps in the fixed order whatever order the server used", () => {
    expect(orderedSteps(triage).map((s) => s.step)).toEqual(["visibility", "software_chain", "capacity", "platform_hardware"]);
    expect(orderedSteps(triage)[2]).toMatchObject({ step: "capacity", status: "unknown", number: 3 });
  });

  it("shows the headline, each step's verdict, and the evidence behind a failure", () => {
    render(<TriageChecklistView triage={triage} />);
    expect(screen.getByTestId("triage-headline")).toHaveTextContent("Step 2 — driver 535.54");
    const steps = screen.getAllByRole("listitem").filter((li) => li.hasAttribute("data-step"));
    expect(steps.map((li) => li.getAttribute("data-step"))).toEqual(["visibility", "software_chain", "capacity", "platform_hardware"]);
    expect(steps[0]).toHaveTextContent("Step 1 — GPU visibility");
    expect(steps[0]).toHaveTextContent("passed");
    expect(steps[1]).toHaveTextContent("failed");
    expect(steps[1]).toHaveTextContent("CUDA 12.4 build on a CUDA 12.2 driver");
    expect(steps[1]).toHaveTextContent("Upgrade the driver");
    expect(steps[1]).toHaveTextContent("535.54");
  });

  it("writes its own headline from the first failing step when the server gives none", () => {
    render(<TriageChecklistView triage={{ steps: [step("capacity", 3, "failed"), step("platform_hardware", 4, "failed")] }} />);
    expect(screen.getByTestId("triage-headline")).toHaveTextContent("Fails at: Capacity & data path");
  });

  it("shows a condition inside its hold time amber as forming, never as passed", () => {
    const forming = { rule: "tcp_retransmits", subject: "node", summary: "TCP retransmits 4.00 %", since: "2026-01-01T00:00:00Z",
      opens_after_s: 300, opens_at: "2026-01-01T00:05:00Z", opens_in_s: 240 };
    render(<TriageChecklistView triage={{
      headline: "Step 3 — forming, opens in 4 min: TCP retransmits 4.00 %",
      steps: [step("visibility", 1, "passed"), step("software_chain", 2, "passed"),
        { ...step("capacity", 3, "pending"), pending: [forming] }, step("platform_hardware", 4, "passed")],
    }} />);
    const headline = screen.getByTestId("triage-headline");
    expect(headline).toHaveAttribute("data-tone", "warn");
    expect(headline).toHaveTextContent("Step 3 — forming, opens in 4 min: TCP retransmits 4.00 %");
    expect(headline).not.toHaveTextContent(/passed/);
    const capacity = screen.getAllByRole("listitem").find((li) => li.getAttribute("data-step") === "capacity")!;
    expect(capacity).toHaveClass("checklist__step--warn");
    expect(capacity).toHaveTextContent("forming");
    expect(capacity).not.toHaveTextContent("passed");
    expect(screen.getByTestId("forming")).toHaveTextContent("TCP retransmits 4.00 % — forming, opens in 4 min");
  });

  it("offers the evidence bundle in both formats", async () => {
    fakeApi({ "GET /api/v1/nodes/7/triage/": triage });
    renderWithProviders(<TriageChecklist nodeId={7} />, { role: "viewer" });
    expect(await screen.findByTestId("triage-headline")).toBeInTheDocument();
    expect(screen.getByRole("link", { name: "Evidence bundle (text)" })).toHaveAttribute("href", "/api/v1/nodes/7/evidence/?format=text");
    expect(screen.getByRole("link", { name: "Evidence bundle (JSON)" })).toHaveAttribute("href", "/api/v1/nodes/7/evidence/?format=json");
  });
});
