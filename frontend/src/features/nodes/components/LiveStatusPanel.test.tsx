import { screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders } from "@/testing/render";
import { LiveStatusPanel } from "./LiveStatusPanel";

const status = (extra: object) => ({
  received_at: "2026-01-01T00:00:00Z", collected_at: "2026-01-01T00:00:00Z", sequence: 1, agent_instance_id: "a",
  silent: false, nvml_status: "ok", gpus: [], ...extra,
});

describe("LiveStatusPanel", () => {
  it("does not count a GPU that fell off the bus as seen", async () => {
    fakeApi({
      "GET /api/v1/nodes/5/status/": status({ gpu_count_seen: 8, lost_gpus: ["00000000:3B:00.0"] }),
      "GET /api/v1/nodes/5/series/": [],
    });
    renderWithProviders(<LiveStatusPanel nodeId={5} />, { role: "viewer" });
    expect(await screen.findByText("7 (1 lost)")).toHaveClass("text-bad");
  });

  it("shows the plain count when every GPU answers", async () => {
    fakeApi({
      "GET /api/v1/nodes/5/status/": status({ gpu_count_seen: 8, lost_gpus: [] }),
      "GET /api/v1/nodes/5/series/": [],
    });
    renderWithProviders(<LiveStatusPanel nodeId={5} />, { role: "viewer" });
    expect(await screen.findByText("GPUs seen")).toBeInTheDocument();
    expect(screen.queryByText(/lost/)).toBeNull();
  });
});
