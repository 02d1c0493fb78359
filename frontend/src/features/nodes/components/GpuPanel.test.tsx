import { screen, within } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders } from "@/testing/render";
import { GpuPanel } from "./GpuPanel";

const gpu = (id: number, index: number) => ({
  id, node: 5, hostname: "gpu-5", index, uuid: `GPU-${id}`, model: "NVIDIA H100 80GB HBM3", memory_total_bytes: 85899345920,
  serial: "", pci_bus_id: `00000000:${index}0:00.0`, compute_capability: "9.0", present: true,
  first_seen: "2026-01-01T00:00:00Z", updated_at: "2026-01-01T00:00:00Z",
});

describe("GpuPanel", () => {
  it("joins each GPU with its live reading and draws its last hour", async () => {
    fakeApi({
      "GET /api/v1/gpus/": { count: 2, results: [gpu(11, 0), gpu(12, 1)] },
      "GET /api/v1/nodes/5/status/": {
        received_at: "2026-01-01T00:00:00Z", collected_at: "2026-01-01T00:00:00Z", sequence: 1, agent_instance_id: "a",
        gpus: [
          { gpu: 12, index: 1, utilization_gpu_pct: 97, temperature_c: 71, memory_used_bytes: 1024 ** 3, pcie_gen_current: 3, pcie_gen_max: 5, pcie_width_current: 16, pcie_width_max: 16 },
          { gpu: 11, index: 0, lost: true },
        ],
      },
      "GET /api/v1/gpus/12/series/": [
        { metric: "utilization_gpu_pct", step: 60, source: "raw", points: [["2026-01-01T00:00:00Z", 90], ["2026-01-01T00:01:00Z", 97]] },
        { metric: "temperature_c", step: 60, source: "raw", points: [] },
      ],
      "GET /api/v1/gpus/11/series/": [],
    });
    renderWithProviders(<GpuPanel nodeId={5} />, { role: "viewer" });
    const rows = await screen.findAllByRole("row");
    const second = rows.find((row) => within(row).queryByText("97 %")) as HTMLElement;
    expect(second).toBeDefined();
    expect(second).toHaveTextContent("71 °C");
    expect(second.querySelector(".cell--warn")).toHaveTextContent("Gen3/5 x16/16"); // degraded PCIe link
    expect(await within(second).findByRole("img", { name: "Utilisation over the last hour: min 90, max 97, latest 97" })).toBeInTheDocument();
    const first = rows.find((row) => row.classList.contains("row--bad")) as HTMLElement;
    expect(first).toHaveTextContent("lost");
  });
});
