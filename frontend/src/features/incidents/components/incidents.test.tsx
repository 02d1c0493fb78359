import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { Route, Routes } from "react-router";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders } from "@/testing/render";
import type { Incident, IncidentDetail, PoolOverview } from "../types/incidents";
import { incidentGroup, stepActions } from "../types/incidents";
import { BreakersPanel } from "./BreakersPanel";
import { IncidentDetailPage } from "./IncidentDetailPage";
import { IncidentsPage } from "./IncidentsPage";
import { NodeRemediationPanel } from "./NodeRemediationPanel";

function incident(id: number, fields: Partial<Incident>): Incident {
  return {
    id, key: `inc-${id}`, node: 10 + id, hostname: `gpu-${id}`, pool: 1, pool_name: "h100", site: null, provider: 1,
    provider_name: "AWS", cause_kind: "xid", cause: "xid:79", title: `gpu-${id}: Xid 79`, state: "running", waiting_on: "",
    state_reason: "", delivery_form: "cloud_dedicated", layer: "hardware", responsible_party: "provider",
    workflow: "cloud-replace", workflow_name: "Cloud: replace", current_step: 0, step_count: 7, current_step_kind: "cordon",
    dry_run: false, opened_at: "2026-12-01T12:00:00Z", started_at: null, closed_at: null, opened_by: "policy",
    resolution: "", replacement_node: null, replacement_hostname: null, ...fields,
  } as Incident;
}

const detail = {
  ...incident(1, { state: "waiting", waiting_on: "operator", state_reason: "Cordon gpu-1 in your scheduler." }),
  plan: [
    { index: 0, kind: "cordon", title: "Cordon the node", params: {}, timeout_s: 3600, on_failure: { action: "wait" },
      requires_approval: false, status: "waiting", attempt: 1, executor: "manual", waiting_on: "operator",
      message: "Cordon gpu-1 in your scheduler.", current: true },
    { index: 1, kind: "retire", title: "", params: {}, timeout_s: null, on_failure: {}, requires_approval: true,
      status: "", attempt: 0, executor: "", waiting_on: "", message: "", current: false },
  ],
  steps: [], findings: [{ id: 5, rule: "xid", summary: "Xid 79 on GPU 3", state: "open", severity: "critical", node: 11,
    trigger: true, attached_at: "2026-12-01T12:00:00Z" }],
  boundary: { delivery_form: "cloud_dedicated", layer: "hardware", responsible_party: "provider", responsibility_source: "default" },
  policy: { id: 4, name: "Cloud, provider's hardware → replace the instance", priority: 40, version: 3, snapshot: {} },
  evidence: [], queue_position: null, breaker: null,
} as unknown as IncidentDetail;

describe("incident groups and step actions", () => {
  it("sorts open incidents into the four queues", () => {
    expect(incidentGroup(incident(1, { state: "queued" }))).toBe("queue");
    expect(incidentGroup(incident(1, { state: "awaiting_approval" }))).toBe("approval");
    expect(incidentGroup(incident(1, { state: "waiting", waiting_on: "provider" }))).toBe("provider");
    expect(incidentGroup(incident(1, { state: "waiting", waiting_on: "vendor" }))).toBe("provider");
    expect(incidentGroup(incident(1, { state: "waiting", waiting_on: "operator" }))).toBe("inFlight");
    expect(incidentGroup(incident(1, { state: "needs_attention" }))).toBe("inFlight");
    expect(incidentGroup(incident(1, { state: "resolved" }))).toBeNull();
  });

  it("offers no 'mark done' for a step that waits only for the control plane's checks", () => {
    expect(stepActions({ status: "waiting" }, "operator")).toContain("complete");
    expect(stepActions({ status: "waiting" }, "verification")).not.toContain("complete");
    expect(stepActions({ status: "awaiting_approval" }, "operator")).toEqual(["approve", "skip"]);
    expect(stepActions({ status: "done" }, "")).toEqual([]);
  });
});

describe("IncidentsPage", () => {
  it("shows the queue, in flight, waiting for approval and waiting for the provider", async () => {
    fakeApi({
      "GET /api/v1/pools/": [],
      "GET /api/v1/incidents/": { count: 4, results: [
        incident(1, { state: "queued", state_reason: "waiting for a remediation slot (queue position 1)" }),
        incident(2, { state: "waiting", waiting_on: "operator" }),
        incident(3, { state: "awaiting_approval", current_step_kind: "retire", current_step: 6 }),
        incident(4, { state: "waiting", waiting_on: "provider", workflow: "hosted-hardware-ticket" }),
      ] },
    });
    renderWithProviders(<IncidentsPage />, { role: "viewer" });
    const queue = await screen.findByTestId("incidents-table-queue");
    expect(within(queue).getByText("inc-1")).toBeInTheDocument();
    expect(within(queue).getByText(/queue position 1/)).toBeInTheDocument();
    expect(within(screen.getByTestId("incidents-table-inFlight")).getByText("inc-2")).toBeInTheDocument();
    expect(within(screen.getByTestId("incidents-table-approval")).getByText("inc-3")).toBeInTheDocument();
    expect(within(screen.getByTestId("incidents-table-provider")).getByText("inc-4")).toBeInTheDocument();
  });
});

function renderDetail(role: "viewer" | "operator") {
  return renderWithProviders(<Routes><Route path="/incidents/:incidentId" element={<IncidentDetailPage />} /></Routes>,
    { route: "/incidents/1", role });
}

describe("IncidentDetailPage", () => {
  it("shows the boundary row and policy that chose the workflow, and a viewer no controls", async () => {
    fakeApi({ "GET /api/v1/incidents/1/": detail, "GET /api/v1/incidents/1/timeline/": [
      { id: 1, at: "2026-12-01T12:00:00Z", kind: "opened", actor_label: "policy", step_index: null, attempt: null,
        step_kind: "", message: "opened by policy #40", output: {} },
    ] });
    renderDetail("viewer");
    const boundary = await screen.findByTestId("incident-boundary");
    expect(boundary).toHaveTextContent("Provider");
    expect(boundary).toHaveTextContent("#40 Cloud, provider's hardware → replace the instance (policy table v3)");
    expect(await screen.findByText("opened by policy #40")).toBeInTheDocument();
    expect(screen.queryByTestId("step-controls")).toBeNull();
    expect(screen.queryByTestId("incident-actions")).toBeNull();
    expect(screen.queryByRole("button")).toBeNull();
  });

  it("lets an operator mark the current step done, naming the step", async () => {
    document.cookie = "csrftoken=test-csrf-token";
    const api = fakeApi({
      "GET /api/v1/incidents/1/": detail,
      "GET /api/v1/incidents/1/timeline/": [],
      "GET /api/v1/workflows/": [{ slug: "owned-rma", name: "Own metal: RMA" }],
      "POST /api/v1/incidents/1/complete/": () => ({ ...detail, current_step: 1 }),
    });
    const user = userEvent.setup();
    renderDetail("operator");
    const controls = await screen.findByTestId("step-controls");
    await user.type(within(controls).getByRole("textbox"), "cordoned in Slurm");
    await user.click(within(controls).getByRole("button", { name: "Mark done" }));
    await waitFor(() => expect(api.calls.some((c) => c.method === "POST")).toBe(true));
    const post = api.calls.find((c) => c.method === "POST")!;
    expect(post.body).toEqual({ step_index: 0, note: "cordoned in Slurm" });
    expect(post.headers["x-csrftoken"]).toBe("test-csrf-token");
  });

  it("says who may not approve a step under the two-person rule, and hides Approve from them", async () => {
    const awaiting = {
      ...detail, state: "awaiting_approval", current_step: 1,
      plan: [{ ...detail.plan[0], current: false, status: "done" },
        { ...detail.plan[1], current: true, status: "awaiting_approval", attempt: 1 }],
      approval_rule: { step_index: 1, two_person: true,
        excluded: [{ username: "operator-user", reason: "opened the incident" }] },
    } as unknown as IncidentDetail;
    fakeApi({
      "GET /api/v1/incidents/1/": awaiting,
      "GET /api/v1/incidents/1/timeline/": [],
      "GET /api/v1/workflows/": [],
    });
    renderDetail("operator");
    const rule = await screen.findByTestId("two-person-rule");
    expect(rule.textContent).toContain("someone other than operator-user (opened the incident)");
    expect(rule.textContent).toContain("You cannot approve it yourself");
    const controls = screen.getByTestId("step-controls");
    expect(within(controls).queryByRole("button", { name: "Approve" })).toBeNull();
    expect(within(controls).getByRole("button", { name: "Skip" })).toBeTruthy();
  });
});

describe("NodeRemediationPanel", () => {
  it("gives an operator cordon, drain, reboot and replace, each opening an operator workflow", async () => {
    const api = fakeApi({
      "GET /api/v1/nodes/7/incidents/": [],
      "POST /api/v1/incidents/": (request) => ({ ...detail, key: "inc-new", ...(request.body as object) }),
    });
    const user = userEvent.setup();
    renderWithProviders(<NodeRemediationPanel nodeId={7} findings={[{ id: 5, title: "Xid 79 on GPU 3" }]} />, { role: "operator" });
    await user.type(await screen.findByRole("textbox"), "flaky since Tuesday");
    await user.click(screen.getByRole("button", { name: "Reboot" }));
    await waitFor(() => expect(api.calls.find((c) => c.method === "POST")?.body).toEqual(
      { node: 7, workflow: "operator-reboot", note: "flaky since Tuesday" }));
    expect(await screen.findByText("Incident inc-new opened.")).toBeInTheDocument();
  });

  it("snoozes a finding only with a reason, and shows a viewer no controls", async () => {
    const api = fakeApi({ "GET /api/v1/nodes/7/incidents/": [], "POST /api/v1/overrides/": { id: 1 } });
    const user = userEvent.setup();
    const { unmount } = renderWithProviders(<NodeRemediationPanel nodeId={7} findings={[{ id: 5, title: "Xid 79" }]} />, { role: "operator" });
    const snooze = await screen.findByRole("button", { name: "Snooze 4 h" });
    expect(snooze).toBeDisabled();
    await user.type(screen.getByRole("textbox"), "vendor on site");
    await user.click(snooze);
    await waitFor(() => expect(api.calls.find((c) => c.method === "POST")?.body).toMatchObject(
      { kind: "snooze", finding: 5, reason: "vendor on site" }));
    unmount();
    fakeApi({ "GET /api/v1/nodes/7/incidents/": [] });
    renderWithProviders(<NodeRemediationPanel nodeId={7} findings={[{ id: 5, title: "Xid 79" }]} />, { role: "viewer" });
    expect(await screen.findByText("No incidents on this node.")).toBeInTheDocument();
    expect(screen.queryByRole("button")).toBeNull();
  });
});

describe("BreakersPanel", () => {
  const pools: PoolOverview[] = [
    { pool: 1, name: "h100", max_concurrent_replacements: 2, active_nodes: 2, queued: 3, dry_run: false, breaker_id: 9,
      breaker_state: "open", breaker_incident: "inc-mass" },
    { pool: 2, name: "a100", max_concurrent_replacements: 1, active_nodes: 0, queued: 0, dry_run: true, breaker_id: 10,
      breaker_state: "closed", breaker_incident: null },
  ];

  it("shows each pool's breaker and lets an operator reset an open one with a note", async () => {
    const api = fakeApi({ "GET /api/v1/pool-remediation/overview/": pools, "POST /api/v1/circuit-breakers/9/reset/": {} });
    const user = userEvent.setup();
    renderWithProviders(<BreakersPanel />, { role: "operator" });
    const table = await screen.findByTestId("breakers-table");
    expect(within(table).getByText("open: automation paused")).toBeInTheDocument();
    expect(within(table).getByText("2 of 2")).toBeInTheDocument();
    const reset = within(table).getByRole("button", { name: "Reset" });
    expect(reset).toBeDisabled();
    await user.type(within(table).getByRole("textbox"), "switch replaced");
    await user.click(reset);
    await waitFor(() => expect(api.calls.find((c) => c.method === "POST")?.body).toEqual({ note: "switch replaced" }));
  });
});
