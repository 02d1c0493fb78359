import { render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { alignPoints, trendColumns } from "@/shared/lib/trend";
import { chartSummary, stackValues, TimeChart } from "./TimeChart";

describe("TimeChart helpers", () => {
  it("stacks bars on the ones before them, leaving gaps as gaps", () => {
    expect(stackValues([[1, 2, null], [3, null, 4]])).toEqual([[1, 2, null], [4, 2, 4]]);
  });

  it("summarises each line for screen readers: latest and range", () => {
    const summary = chartSummary([{ label: "GPU", color: "#000", values: [10, null, 90, 40] }], (v) => `${v} %`);
    expect(summary).toBe("GPU: 40 % (10 %–90 %)");
    expect(chartSummary([{ label: "Empty", color: "#000", values: [null] }], String)).toBe("Empty: —");
  });

  it("puts series of one answer on one time axis", () => {
    const columns = trendColumns({ series: [
      { key: "a", points: [["2026-12-01T00:00:00Z", 1], ["2026-12-01T01:00:00Z", 2]] },
      { key: "b", points: [["2026-12-01T01:00:00Z", "5.5"], ["bad", 9]] },
    ] });
    const t0 = Date.parse("2026-12-01T00:00:00Z") / 1000;
    expect(columns.times).toEqual([t0, t0 + 3600]);
    expect(columns.values).toEqual({ a: [1, 2], b: [null, 5.5] });
    expect(alignPoints({ x: [[2, 1]], y: [[1, 3], [2, null]] })).toEqual({ times: [1, 2], values: { x: [null, 1], y: [3, null] } });
  });

  it("names what it shows and how many points it has, even without a canvas", () => {
    render(<TimeChart label="Utilisation" testId="chart" times={[1, 2, 3]} format={(v) => `${v} %`}
      thresholds={[{ value: 100, label: "100 %" }]} marks={[{ at: 2, label: "Xid 79" }]}
      lines={[{ label: "GPU 0", color: "#000", values: [5, 50, 95] }]} />);
    const chart = screen.getByTestId("chart");
    expect(chart).toHaveAttribute("data-points", "3");
    expect(screen.getByRole("img", { name: /Utilisation\. GPU 0: 95 % \(5 %–95 %\)/ })).toBeInTheDocument();
    expect(chart).toHaveTextContent("┄ 100 %");
    expect(screen.getByTestId("chart-marks")).toHaveTextContent("1 × Xid 79");
  });
});
