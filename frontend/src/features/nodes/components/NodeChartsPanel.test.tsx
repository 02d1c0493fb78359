import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders } from "@/testing/render";
import type { NodeEvent } from "../types/telemetry";
import { eccMarks, eventMarks, NodeChartsPanel } from "./NodeChartsPanel";

const event = (extra: Partial<NodeEvent>): NodeEvent => ({
  id: 1, node: 7, hostname: "n", gpu_index: 0, gpu_uuid: "", kind: "xid", code: 79, at: "2026-12-01T12:00:00Z",
  received_at: "2026-12-01T12:00:01Z", ...extra,
} as NodeEvent);

describe("node and GPU charts", () => {
  it("marks Xid events of the GPU (and node-wide ones), and every rise of the uncorrectable ECC count", () => {
    const events = [event({ gpu_index: 0, code: 79 }), event({ id: 2, gpu_index: 3, code: 48 }), event({ id: 3, gpu_index: null as unknown as number, kind: "aer", code: null })];
    expect(eventMarks(events, 0).map((m) => m.label)).toEqual(["Xid 79", "AER"]);
    expect(eventMarks(events).length).toBe(3);
    expect(eccMarks([[1, 0], [2, 0], [3, 2], [4, null], [5, 2], [6, 3]], "ECC").map((m) => m.at)).toEqual([3, 6]);
  });

  it("asks for the picked range and a GPU's metrics, with its power limit and memory total drawn in", async () => {
    const api = fakeApi({
      "GET /api/v1/nodes/7/status/": { gpus: [{ gpu: 70, index: 0, uuid: "GPU-0", model: "H100", collected_at: "2026-12-01T12:00:00Z",
        power_limit_w: 700, temperature_slowdown_c: 89, temperature_shutdown_c: 92, memory_total_bytes: 80 * 1024 ** 3, pcie_gen_current: 4, pcie_gen_max: 5, pcie_width_current: 16, pcie_width_max: 16 }] },
      "GET /api/v1/events/": { count: 1, results: [event({ gpu_index: 0 })] },
      "GET /api/v1/nodes/7/series/": [{ metric: "gpu_util_avg_pct", step: 900, source: "5m", points: [["2026-12-01T12:00:00Z", 50]] }],
      "GET /api/v1/gpus/70/series/": [
        { metric: "utilization_gpu_pct", step: 3600, source: "5m", points: [["2026-12-01T12:00:00Z", 80]] },
        { metric: "power_draw_w", step: 3600, source: "5m", points: [["2026-12-01T12:00:00Z", 650]] },
      ],
    });
    const user = userEvent.setup();
    renderWithProviders(<NodeChartsPanel nodeId={7} />, { role: "viewer" });
    await screen.findByTestId("chart-node");
    const nodeCall = api.calls.find((c) => c.url.pathname === "/api/v1/nodes/7/series/")!;
    expect(nodeCall.url.searchParams.get("step")).toBe("900");
    const span = Date.parse(nodeCall.url.searchParams.get("end")!) - Date.parse(nodeCall.url.searchParams.get("start")!);
    expect(span).toBe(86_400_000);

    await user.click(within(screen.getByTestId("node-chart-range")).getByRole("button", { name: "7 d" }));
    await user.selectOptions(await screen.findByTestId("chart-gpu-select"), "70");
    await screen.findByTestId("gpu-charts");
    const gpuCall = api.calls.find((c) => c.url.pathname === "/api/v1/gpus/70/series/")!;
    expect(gpuCall.url.searchParams.get("step")).toBe("3600");
    expect(gpuCall.url.searchParams.getAll("metric")).toContain("temperature_c");
    expect(screen.getByTestId("chart-gpu-power")).toHaveTextContent("limit 700 W");
    expect(screen.getByTestId("chart-gpu-memory")).toHaveTextContent("total 80 GiB");
    expect(screen.getByTestId("chart-gpu-temperature")).toHaveTextContent("slowdown 89 °C");
    expect(screen.getByTestId("chart-gpu-util-marks")).toHaveTextContent("Xid 79");
    expect(screen.getByTestId("pcie-link")).toHaveTextContent("Gen4 x16 of Gen5 x16");
    expect(screen.getByTestId("pcie-link")).toHaveTextContent("degraded");
  }, 20_000);

  it("draws no slowdown line for a GPU whose board reports no thresholds", async () => {
    fakeApi({
      "GET /api/v1/nodes/7/status/": { gpus: [{ gpu: 71, index: 0, uuid: "GPU-1", model: "vGPU", collected_at: "2026-12-01T12:00:00Z",
        temperature_slowdown_c: null, temperature_shutdown_c: null }] },
      "GET /api/v1/events/": { count: 0, results: [] },
      "GET /api/v1/nodes/7/series/": [],
      "GET /api/v1/gpus/71/series/": [{ metric: "temperature_c", step: 900, source: "5m", points: [["2026-12-01T12:00:00Z", 61]] }],
    });
    const user = userEvent.setup();
    renderWithProviders(<NodeChartsPanel nodeId={7} />, { role: "viewer" });
    const select = await screen.findByTestId("chart-gpu-select");
    await waitFor(() => expect(within(select).getAllByRole("option")).toHaveLength(2));
    await user.selectOptions(select, "71");
    await screen.findByTestId("gpu-charts");
    expect(screen.getByTestId("chart-gpu-temperature")).not.toHaveTextContent("slowdown");
  }, 20_000);
});
