import { screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders } from "@/testing/render";
import { FleetTrendsPage } from "./FleetTrendsPage";

const trend = (keys: Record<string, (number | null)[]>) => ({
  range: "7d", start: "2026-12-01T00:00:00Z", end: "2026-12-01T02:00:00Z", step: 3600,
  series: Object.entries(keys).map(([key, values]) => ({
    key, points: values.map((v, i) => [`2026-12-01T0${i}:00:00Z`, v]) })),
});

function api() {
  return fakeApi({
    "GET /api/v1/fleet/utilisation/": trend({ utilisation_pct: [40, 60] }),
    "GET /api/v1/fleet/findings-trend/": trend({ "open.visibility": [0, 1], "open.software_chain": [0, 0], "open.capacity": [2, 2],
      "open.platform_hardware": [1, 3], healthy_gpu_share: [1, 0.875] }),
    "GET /api/v1/fleet/xid-daily/": { days: ["2026-11-30", "2026-12-01"], series: [{ code: 79, counts: [0, 2] }, { code: 48, counts: [1, 0] }] },
    "GET /api/v1/preemption-rates/daily/": { days: ["2026-11-30", "2026-12-01", "2026-12-02"], pools: [
      { pool_id: 3, name: "spot-a", preemptions: [0, 1, 2], node_hours: ["0.00", "48.00", "24.00"], rate_per_node_day: [null, "0.500000", "2.000000"] },
      { pool_id: 4, name: "spot-b", preemptions: [0, 0, 0], node_hours: ["24.00", "24.00", "24.00"], rate_per_node_day: ["0.000000", "0.000000", "0.000000"] }] },
    "GET /api/v1/cost-history/": [
      { month: "2026-11", currency: "USD", nodes: 2, gpu_count: 16, total: "1000.00", utilisation_pct: "50.00", per_utilised_gpu_hour: "0.1712", estimated: true },
      { month: "2026-12", currency: "USD", nodes: 2, gpu_count: 16, total: "1100.00", utilisation_pct: null, per_utilised_gpu_hour: null, estimated: false },
      { month: "2026-12", currency: "CNY", nodes: 1, gpu_count: 8, total: "9000.00", utilisation_pct: "80.00", per_utilised_gpu_hour: "1.9264", estimated: false },
    ],
    "GET /api/v1/provider-scorecard/": [{ provider_id: 1, provider: "AWS", kind: "cloud", support_contact: "aws-support@example.com", gpu_days: "240.00",
      findings: 3, provider_findings: 2, incidents: 1, findings_per_1k_gpu_days: "12.50", provider_findings_per_1k_gpu_days: "8.33", incidents_per_1k_gpu_days: "4.17" }],
  });
}

describe("FleetTrendsPage", () => {
  it("draws every fleet chart for the range in the URL, and asks again when the range changes", async () => {
    const fake = api();
    const user = userEvent.setup();
    renderWithProviders(<FleetTrendsPage />, { role: "viewer", route: "/trends?range=7d" });
    expect(await screen.findByRole("img", { name: /Open findings by triage step\. .*Platform \/ hardware: 3 \(1–3\)/ })).toBeInTheDocument();
    expect(await screen.findByRole("img", { name: /Healthy GPUs\. .*87\.5 %/ })).toBeInTheDocument();
    expect(await screen.findByRole("img", { name: /Xid events per day by code\. Xid 79: 2 \(0–2\); Xid 48: 0 \(0–1\)/ })).toBeInTheDocument();
    expect(fake.calls.find((c) => c.url.pathname === "/api/v1/fleet/utilisation/")!.url.searchParams.get("range")).toBe("7d");
    // One line per spot pool over the days, the latest day's rate in the summary; totals under the chart.
    expect(await screen.findByRole("img", { name: /Preemptions per node-day\. spot-a: 2 \(0\.5–2\); spot-b: 0 \(0–0\)/ })).toBeInTheDocument();
    expect(fake.calls.find((c) => c.url.pathname === "/api/v1/preemption-rates/daily/")!.url.searchParams.get("days")).toBe("30");
    expect(screen.getByTestId("preemption-totals")).toHaveTextContent("spot-a: 3 preemptions in 72 node-hours");
    const row = await screen.findByTestId("scorecard-row");
    expect(row).toHaveTextContent("aws-support@example.com");
    expect(row).toHaveTextContent("12.5");

    await user.click(within(screen.getByTestId("trends-range")).getByRole("button", { name: "30 d" }));
    await screen.findAllByTestId("chart-utilisation");
    expect(fake.calls.some((c) => c.url.pathname === "/api/v1/fleet/utilisation/" && c.url.searchParams.get("range") === "30d")).toBe(true);
  }, 20_000);

  it("charts each currency's cost on its own axis, never adding currencies together", async () => {
    api();
    renderWithProviders(<FleetTrendsPage />, { role: "viewer", route: "/trends" });
    const blocks = await screen.findAllByTestId("cost-currency");
    expect(blocks.map((b) => within(b).getAllByRole("heading")[0].textContent)).toEqual(["USD", "CNY"]);
    expect(within(blocks[0]).getByRole("img", { name: /Cost per month \(USD\)\. USD: \$1,100/ })).toBeInTheDocument();
    expect(within(blocks[1]).getByRole("img", { name: /Cost per month \(CNY\)\. CNY: CN¥9,000/ })).toBeInTheDocument();
    // Only November has days costed at today's prices; December was recorded at the prices of the time.
    expect(screen.getByTestId("cost-estimated")).toHaveTextContent("Estimated at today's prices (days without a cost recorded then): 2026-11");
    expect(screen.getByTestId("cost-estimated")).not.toHaveTextContent("2026-12");
  }, 20_000);
});
