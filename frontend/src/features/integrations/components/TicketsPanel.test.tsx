import { screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders, reply } from "@/testing/render";
import { TicketsPanel } from "./TicketsPanel";

describe("TicketsPanel", () => {
  it("lists a node's external tickets with their ids and links", async () => {
    const api = fakeApi({
      "GET /api/v1/tickets/": {
        count: 2, results: [
          { id: 2, integration: 1, integration_name: "jira-ops", connector: "jira", key: "fleet-finding-42",
            subject_kind: "finding", subject_ref: "finding:xid:7:gpu:3:xid:79", incident_id: null, node: 7, findings: [42],
            state: "in_progress", external_id: "OPS-7", external_url: "https://acme.atlassian.net/browse/OPS-7",
            title: "Xid 79 on GPU 3", opened_at: "2026-12-01T12:00:00Z", resolve_after: null, resolved_at: null,
            last_update_at: null },
          { id: 1, integration: 2, integration_name: "hostco-desk", connector: "email", key: "fleet-finding-40",
            subject_kind: "finding", subject_ref: "r", incident_id: null, node: 7, findings: [40], state: "resolved",
            external_id: "", external_url: "", title: "", opened_at: "2026-11-30T12:00:00Z", resolve_after: null,
            resolved_at: "2026-11-30T14:00:00Z", last_update_at: null },
        ],
      },
    });
    renderWithProviders(<TicketsPanel of={{ node: 7 }} />, { role: "viewer" });
    const panel = await screen.findByTestId("tickets-panel");
    expect(await within(panel).findByRole("link", { name: "OPS-7" })).toHaveAttribute("href", "https://acme.atlassian.net/browse/OPS-7");
    expect(within(panel).getByText("in progress")).toBeInTheDocument();
    expect(within(panel).getByText("fleet-finding-40", { selector: "code" })).toBeInTheDocument();
    expect(api.calls[0].url.searchParams.get("node")).toBe("7");
  });
});

describe("TicketsPanel for an incident", () => {
  it("lets an operator acknowledge an open ticket, and offers viewers nothing", async () => {
    const ticket = { id: 5, integration: 3, integration_name: "pd-oncall", connector: "pagerduty", key: "fleet-incident-inc-7",
      subject_kind: "incident", subject_ref: "incident:inc-7", incident_id: 7, node: 7, findings: [], state: "open",
      external_id: "", external_url: "", title: "gpu-0042: Xid 79", opened_at: "2026-12-01T12:00:00Z", resolve_after: null,
      resolved_at: null, last_update_at: null };
    const api = fakeApi({
      "GET /api/v1/tickets/": { count: 1, results: [ticket] },
      "POST /api/v1/tickets/5/acknowledge/": () => reply(202, { id: 11, action: "acknowledge", state: "pending" }),
    });
    const user = userEvent.setup();
    const { unmount } = renderWithProviders(<TicketsPanel of={{ incident_id: 7 }} />, { role: "operator" });
    await user.click(await screen.findByRole("button", { name: "Acknowledge ticket fleet-incident-inc-7" }));
    expect(await screen.findByText("Acknowledgement queued.")).toBeInTheDocument();
    const post = api.calls.find((c) => c.method === "POST")!;
    expect(post.body).toEqual({ note: "" });
    expect(api.calls[0].url.searchParams.get("incident_id")).toBe("7");
    unmount();

    renderWithProviders(<TicketsPanel of={{ incident_id: 7 }} />, { role: "viewer" });
    await screen.findByText("fleet-incident-inc-7", { selector: "code" });
    expect(screen.queryByRole("button", { name: /Acknowledge/ })).toBeNull();
  });
});
