import { screen, within } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders } from "@/testing/render";
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
