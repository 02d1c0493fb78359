import { screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders, reply } from "@/testing/render";
import type { Delivery, DeliveryDetail } from "../types/integrations";
import { DeliveryLogPage } from "./DeliveryLogPage";

function delivery(id: number, extra: Partial<Delivery> = {}): Delivery {
  return {
    id, integration: 1, integration_name: "pd-oncall", connector: "pagerduty",
    ticket: { id: 4, key: "fleet-finding-42", state: "opening", external_id: "", external_url: "" },
    event_kind: "finding.opened", action: "open", dedup_key: `fleet-finding-42:open`, title: "[CRITICAL] Xid error on gpu-0042",
    state: "dead", attempts: 1, created_at: "2026-12-01T12:00:00Z", next_attempt_at: "2026-12-01T12:00:00Z",
    delivered_at: null, dead_at: "2026-12-01T12:00:01Z", last_status_code: 400,
    last_error: "POST https://events.pagerduty.com/v2/enqueue answered 400: Invalid routing key", response: {},
    ...extra,
  };
}

const DETAIL: DeliveryDetail = {
  ...delivery(7), event: {}, payload: { body: "Xid 79 on GPU 3: GPU has fallen off the bus" }, progress: {}, held_behind: null,
  attempt_log: [{ number: 1, started_at: "2026-12-01T12:00:00Z", finished_at: "2026-12-01T12:00:01Z", outcome: "dead",
    status_code: 400, error: "answered 400: Invalid routing key", retry_after_s: null,
    exchanges: [{ method: "POST", url: "https://events.pagerduty.com/v2/enqueue", status: 400, duration_ms: 81.2 }] }],
};

describe("DeliveryLogPage", () => {
  it("shows dead letters with their tries and lets an operator retry one", async () => {
    let state: Delivery["state"] = "dead";
    const api = fakeApi({
      "GET /api/v1/integrations/": [],
      "GET /api/v1/deliveries/": () => ({ count: 1, results: [delivery(7, { state })] }),
      "GET /api/v1/deliveries/7/": DETAIL,
      "POST /api/v1/deliveries/7/retry/": () => { state = "retrying"; return reply(200, { ...DETAIL, state: "retrying" }); },
    });
    const user = userEvent.setup();
    renderWithProviders(<DeliveryLogPage />, { role: "operator", route: "/integrations/deliveries?state=dead" });
    const table = await screen.findByTestId("deliveries");
    const row = within(table).getByRole("row", { name: /Xid error on gpu-0042/ });
    expect(row).toHaveTextContent("dead-lettered");
    expect(row).toHaveTextContent("Invalid routing key");
    const list = api.calls.find((c) => c.url.pathname === "/api/v1/deliveries/")!;
    expect(list.url.searchParams.get("state")).toBe("dead");

    await user.click(within(row).getByRole("button", { name: "Details" }));
    const detail = await screen.findByTestId("delivery-detail-7");
    expect(detail).toHaveTextContent("fleet-finding-42:open");
    expect(detail).toHaveTextContent("POST https://events.pagerduty.com/v2/enqueue → 400 (81.2 ms)");

    await user.click(within(row).getByRole("button", { name: "Retry message 7" }));
    expect(await within(table).findByText("retrying")).toBeInTheDocument();
    expect(api.calls.some((c) => c.method === "POST" && c.url.pathname === "/api/v1/deliveries/7/retry/")).toBe(true);
  });

  it("offers viewers no retry", async () => {
    fakeApi({
      "GET /api/v1/integrations/": [],
      "GET /api/v1/deliveries/": { count: 1, results: [delivery(7)] },
    });
    renderWithProviders(<DeliveryLogPage />, { role: "viewer" });
    const table = await screen.findByTestId("deliveries");
    expect(within(table).queryByRole("button", { name: /Retry/ })).toBeNull();
  });
});
