import { describe, expect, it } from "vitest";
import { normaliseSeries, normaliseSeriesSet, seriesStats } from "./series";

describe("series", () => {
  it("reads the telemetry API's answer, one entry per metric", () => {
    const answer = [
      { metric: "utilization_gpu_pct", step: 60, source: "raw", points: [["2026-01-01T00:01:00+00:00", 50], ["2026-01-01T00:00:00+00:00", 40]] },
      { metric: "temperature_c", step: 60, source: "raw", points: [["2026-01-01T00:00:00+00:00", 61.5]] },
    ];
    const set = normaliseSeriesSet(answer, ["utilization_gpu_pct", "temperature_c", "power_draw_w"]);
    expect(set.utilization_gpu_pct).toEqual([[Date.parse("2026-01-01T00:00:00Z") / 1000, 40], [Date.parse("2026-01-01T00:01:00Z") / 1000, 50]]);
    expect(set.temperature_c[0][1]).toBe(61.5);
    expect(set.power_draw_w).toEqual([]);
    expect(normaliseSeries(answer, "temperature_c")).toHaveLength(1);
  });

  it("takes bare lists of pairs or records, in seconds or milliseconds", () => {
    expect(normaliseSeries([[1_700_000_000_000, "3"]])).toEqual([[1_700_000_000, 3]]);
    expect(normaliseSeries({ points: [{ at: "2026-01-01T00:00:00Z", value: null }] })).toEqual([[Date.parse("2026-01-01T00:00:00Z") / 1000, null]]);
    expect(normaliseSeries("nonsense")).toEqual([]);
  });

  it("summarises min, max and latest, ignoring gaps", () => {
    expect(seriesStats([[1, 5], [2, null], [3, 2]])).toEqual({ min: 2, max: 5, last: 2 });
    expect(seriesStats([])).toEqual({ min: null, max: null, last: null });
  });
});
