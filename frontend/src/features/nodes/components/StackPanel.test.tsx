import { describe, expect, it } from "vitest";
import { stackRows } from "./StackPanel";

describe("stackRows", () => {
  it("compares every component with the baseline and flags the drifted ones", () => {
    const stack = { id: 1, node: 1, collected_at: "", hash: "", driver_version: "560.35.03", cuda_driver_version: "12.6",
      cuda_toolkits: [], python_version: "3.11", frameworks: [{ name: "torch", version: "2.4.0", cuda: "12.4" }],
      container_runtime: "", nvidia_container_toolkit: "", os: "Ubuntu 22.04", kernel: "6.5" };
    const drift = {
      baseline: { id: 1, name: "h100-pool", pool: 1, node: null, driver_version: "550.90.07", cuda_driver_version: "",
        cuda_toolkits: [], frameworks: [{ name: "torch", version: "2.4.0" }], container_runtime: "", nvidia_container_toolkit: "",
        os: "", kernel: "", gpu_model: "", gpu_memory_bytes: null, gpu_count: 8, updated_at: "" },
      drifted: true,
      drift: [{ field: "driver_version", expected: "550.90.07", actual: "560.35.03" }, { field: "gpu_count", expected: 8, actual: 7 }],
    };
    const rows = stackRows(stack as never, drift as never);
    expect(rows.find((r) => r.field === "driver_version")).toEqual({ field: "driver_version", expected: "550.90.07", actual: "560.35.03", drifted: true });
    expect(rows.find((r) => r.field === "os")).toMatchObject({ actual: "Ubuntu 22.04", drifted: false });
    expect(rows.find((r) => r.field === "frameworks.torch.version")).toMatchObject({ expected: "2.4.0", actual: "2.4.0", drifted: false });
    expect(rows.find((r) => r.field === "gpu_count")).toMatchObject({ expected: 8, actual: 7, drifted: true });
    expect(rows.filter((r) => r.drifted)).toHaveLength(2);
  });
});
