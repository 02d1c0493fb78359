import { screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders, reply, type FakeRequest } from "@/testing/render";
import { BillingPage } from "./BillingPage";

const scenario = (kind: string, label: string, total: string) => ({
  scenario: kind, label, available: true, source: "price list", currency: "USD", term_months: null, compute_per_node: total,
  overhead_per_node: "0", preemption_loss_per_node: "0", total_per_node: total, total_monthly: total, tco_per_gpu_hour: "1",
  difference_vs_current: "0", notes: [],
});

function api() {
  return fakeApi({
    "GET /api/v1/cost-report/": { generated_at: "", period_days: 30, hours_per_month: "730", unpriced_nodes: 0,
      totals: [{ currency: "USD", nodes: 1, gpu_count: 8, compute: "7300", storage: "0", egress: "0", backup: "0", ops: "0", total: "7300", gpu_hours: "5840", tco_per_gpu_hour: "1.25" }],
      rows: [{ node_id: 4, hostname: "gpu-a", provider: "AWS", site: null, pool: "train", instance_type: "p5", billing_mode: "spot", rate_source: "pool_plan", currency: "USD",
        gpu_count: 8, compute: "7300", storage: null, egress: null, backup: null, ops: null, total: "7300", gpu_hours: "5840", tco_per_gpu_hour: "1.25", utilisation_pct: "50", tco_per_utilised_gpu_hour: "2.5", warnings: [] }] },
    "GET /api/v1/pools/": { count: 1, results: [{ id: 3, name: "train" }] },
    "GET /api/v1/pools/3/what-if/": (request: FakeRequest) => {
      if (request.url.searchParams.get("spot_preemption_rate") === "-1") {
        return reply(400, { error: { code: "invalid", message: "Invalid input.", fields: { spot_preemption_rate: ["Ensure this value is greater than or equal to 0."] } } });
      }
      return { pool_id: 3, pool_name: "train", generated_at: "", node_count: 1, gpus_per_node: 8, instance_type: "p5", preemptions_per_node_day: "0.1",
        preemption_rate_basis: "measured", lost_gpu_hours_per_preemption: "1", lost_work_basis: "", scenarios: [
          scenario("current", "Today", "7300"), scenario("on_demand", "On-demand", "24000"), scenario("reserved", "Reserved", "15000")] };
    },
    "GET /api/v1/expiring-reserved-terms/": [],
    "GET /api/v1/preemption-rates/": [],
    "GET /api/v1/preemptions/": { count: 0, results: [] },
  });
}

describe("BillingPage", () => {
  it("offers the cost report as a CSV download for the chosen period", async () => {
    api();
    const user = userEvent.setup();
    renderWithProviders(<BillingPage />, { role: "viewer" });
    expect(await screen.findByTestId("cost-row")).toHaveTextContent("gpu-a");
    expect(screen.getByTestId("cost-csv")).toHaveAttribute("href", "/api/v1/cost-report.csv?period_days=30");
    await user.selectOptions(within(screen.getByTestId("cost-report")).getByRole("combobox"), "90");
    expect(screen.getByTestId("cost-csv")).toHaveAttribute("href", "/api/v1/cost-report.csv?period_days=90");
  });

  it("puts a pool's what-if scenarios side by side and names a bad input beside its field", async () => {
    const fake = api();
    const user = userEvent.setup();
    renderWithProviders(<BillingPage />, { role: "viewer" });
    await screen.findByRole("option", { name: "train" });
    await user.selectOptions(screen.getByTestId("what-if-pool"), "3");
    const scenarios = await screen.findAllByTestId("scenario");
    expect(scenarios.map((s) => within(s).getByRole("heading").textContent)).toEqual(["Today", "On-demand", "Reserved"]);
    await user.type(screen.getByLabelText("Spot preemptions per node-day"), "-1");
    await user.click(screen.getByRole("button", { name: "Compare" }));
    const field = (await screen.findByLabelText(/^Spot preemptions per node-day/)).closest("label")!;
    expect(await within(field).findByRole("alert")).toHaveTextContent("greater than or equal to 0");
    expect(fake.calls.some((c) => c.url.searchParams.get("spot_preemption_rate") === "-1")).toBe(true);
  }, 20_000);
});
