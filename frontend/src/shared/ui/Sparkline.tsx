// A small line chart drawn with uPlot (canvas): fast enough for a page of GPUs refreshing every few seconds.
import { useEffect, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import type { Point } from "@/shared/lib/series";

interface SparklineProps {
  points: Point[];
  label: string;
  width?: number;
  height?: number;
  min?: number;
  max?: number;
  color?: string;
}

function toData(points: Point[]): uPlot.AlignedData {
  return [points.map((p) => p[0]), points.map((p) => p[1])];
}

let canvasSupport: boolean | undefined;
/** uPlot needs a 2D canvas; a test DOM has none (the text label still says what the chart shows). */
function canDraw(): boolean {
  if (canvasSupport === undefined) {
    try {
      canvasSupport = Boolean(document.createElement("canvas").getContext("2d"));
    } catch {
      canvasSupport = false;
    }
  }
  return canvasSupport;
}

export function Sparkline({ points, label, width = 160, height = 36, min, max, color = "#2f6fb3" }: SparklineProps) {
  const container = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const latest = useRef(points);

  // Declared before the effect that builds the plot, so a rebuild (new size) draws the newest points.
  useEffect(() => {
    latest.current = points;
    plot.current?.setData(toData(points));
  }, [points]);

  useEffect(() => {
    const element = container.current;
    if (!element || !canDraw()) return;
    const options: uPlot.Options = {
      width,
      height,
      pxAlign: false,
      cursor: { show: false },
      legend: { show: false },
      select: { show: false, left: 0, top: 0, width: 0, height: 0 },
      axes: [{ show: false }, { show: false }],
      scales: {
        x: { time: true },
        y: { range: (_u, dataMin, dataMax) => [min ?? Math.min(0, dataMin ?? 0), max ?? Math.max(dataMax ?? 1, 1)] },
      },
      series: [{}, { stroke: color, width: 1.5, fill: `${color}22`, points: { show: false } }],
    };
    plot.current = new uPlot(options, toData(latest.current), element);
    return () => {
      plot.current?.destroy();
      plot.current = null;
    };
  }, [width, height, min, max, color]);

  return <div className="sparkline" ref={container} role="img" aria-label={label} style={{ width, height }} />;
}
