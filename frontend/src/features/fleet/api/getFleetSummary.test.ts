import { describe, expect, it } from "vitest";
import { summaryBreakdowns } from "./getFleetSummary";

describe("fleet summary", () => {
  it("turns the by_* maps into sorted breakdowns that link to the filtered nodes table", () => {
    const breakdowns = summaryBreakdowns({
      nodes: 24, gpus: 150, silent: 2, reporting: 21, nvml_unavailable: 1,
      by_state: { active: 20, preempted: 2, cordoned: 2 }, by_delivery_form: { cloud_dedicated: 10 },
      by_billing_mode: { spot: 6, none: 1 }, by_provider: { AWS: 8 },
    });
    expect(breakdowns.map((b) => b.name)).toEqual(["state", "delivery_form", "billing_mode", "provider"]);
    expect(breakdowns[0].entries[0]).toEqual({ value: "active", count: 20, filter: { state: "active" } });
    expect(breakdowns[2].entries.find((e) => e.value === "none")).toEqual({ value: "none", count: 1 });
    expect(breakdowns[3].entries).toEqual([{ value: "AWS", count: 8 }]);
  });
});
