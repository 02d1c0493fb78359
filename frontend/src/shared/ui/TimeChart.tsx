// A time chart drawn with uPlot: axes, hover values in the legend, threshold lines and marks on the time axis.
// Every chart of the console (node, GPU and fleet) is this one component, so they read alike. Times are the
// browser's local time, the zone named under the chart, like every date of the console (formatDateTime).
import { useEffect, useMemo, useRef, useState } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { formatDateTime, formatNumber, timeZoneLabel } from "@/shared/lib/format";

export interface ChartLine {
  label: string;
  values: (number | null)[];
  color: string;
  /** Draw as bars (stacked on the lines before it when `stack` is set on the chart). */
  bars?: boolean;
  dash?: number[];
}

export interface Threshold {
  value: number;
  label: string;
  color?: string;
}

export interface Mark {
  /** Unix seconds. */
  at: number;
  label: string;
  color?: string;
}

interface TimeChartProps {
  /** What the chart shows; also its accessible name. */
  label: string;
  /** Unix seconds, ascending, one per value of every line. */
  times: number[];
  lines: ChartLine[];
  thresholds?: Threshold[];
  marks?: Mark[];
  format?: (value: number) => string;
  yMin?: number;
  yMax?: number;
  height?: number;
  /** Stack bar lines: each bar sits on the ones before it (the legend still shows each line's own value). */
  stack?: boolean;
  /** Counts: the y axis steps in whole numbers. */
  integer?: boolean;
  testId?: string;
}

let canvasSupport: boolean | undefined;
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

/** Cumulative sums for stacked bars: line i is drawn at the sum of lines 0..i. */
export function stackValues(lines: (number | null)[][]): (number | null)[][] {
  const out: (number | null)[][] = [];
  lines.forEach((values, index) => {
    out.push(values.map((value, at) => {
      const below = index > 0 ? out[index - 1][at] ?? 0 : 0;
      return value === null ? (index > 0 ? out[index - 1][at] : null) : below + value;
    }));
  });
  return out;
}

/** A short text of what the chart shows (latest, min, max per line), for screen readers and tests. */
export function chartSummary(lines: ChartLine[], format: (value: number) => string): string {
  return lines.map((line) => {
    const values = line.values.filter((v): v is number => v !== null && Number.isFinite(v));
    if (!values.length) return `${line.label}: —`;
    return `${line.label}: ${format(values[values.length - 1])} (${format(Math.min(...values))}–${format(Math.max(...values))})`;
  }).join("; ");
}

function useWidth(element: React.RefObject<HTMLDivElement | null>): number {
  const [width, setWidth] = useState(600);
  useEffect(() => {
    const node = element.current;
    if (!node || typeof ResizeObserver === "undefined") return;
    const observer = new ResizeObserver((entries) => {
      const next = Math.max(240, Math.floor(entries[0].contentRect.width));
      setWidth((previous) => (Math.abs(previous - next) > 4 ? next : previous));
    });
    observer.observe(node);
    return () => observer.disconnect();
  }, [element]);
  return width;
}

export function TimeChart({ label, times, lines, thresholds = [], marks = [], format = (v) => formatNumber(v, 1),
  yMin, yMax, height = 200, stack = false, integer = false, testId }: TimeChartProps) {
  const frame = useRef<HTMLDivElement>(null);
  const canvas = useRef<HTMLDivElement>(null);
  const width = useWidth(frame);
  const drawn = useMemo(() => (stack ? stackValues(lines.map((l) => l.values)) : lines.map((l) => l.values)),
    [lines, stack]);
  const data = useMemo(() => {
    // A single point (one month, a fresh fleet) would stretch the time axis over years: frame it with two
    // empty points a fortnight either side.
    if (times.length === 1) {
      const pad = 15 * 86_400;
      return [[times[0] - pad, times[0], times[0] + pad], ...drawn.map((v) => [null, v[0], null])] as uPlot.AlignedData;
    }
    return [times, ...drawn] as uPlot.AlignedData;
  }, [times, drawn]);
  const latest = useRef({ data, lines, thresholds, marks, format });
  const plot = useRef<uPlot | null>(null);
  const shape = lines.map((l) => `${l.label}|${l.color}|${l.bars ? 1 : 0}`).join(",");

  // Declared before the effect that builds the plot, so a rebuild draws the newest data, thresholds and marks.
  useEffect(() => {
    latest.current = { data, lines, thresholds, marks, format };
    plot.current?.setData(data);
  }, [data, lines, thresholds, marks, format]);

  useEffect(() => {
    const element = canvas.current;
    if (!element || !canDraw()) return;
    const current = latest.current;
    const bars = uPlot.paths.bars ? uPlot.paths.bars({ size: [0.7, 40] }) : undefined;
    const options: uPlot.Options = {
      width,
      height,
      cursor: { drag: { x: false, y: false } },
      legend: { show: true, live: true },
      scales: {
        x: { time: true },
        y: { range: (_u, dataMin, dataMax) => {
          const top = Math.max(dataMax ?? 1, ...latest.current.thresholds.map((t) => t.value));
          return [yMin ?? Math.min(0, dataMin ?? 0), yMax ?? (top > 0 ? top * 1.05 : 1)];
        } },
      },
      axes: [
        { stroke: "#555", grid: { stroke: "#eee" } },
        {
          stroke: "#555", grid: { stroke: "#eee" },
          incrs: integer ? [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000] : undefined,
          values: (_u, splits) => splits.map((v) => latest.current.format(v)),
          // Wide enough for the longest label ("¥135,000.00"), so money is never cut off.
          size: (_u, values) => Math.max(44, ...(values ?? []).map((v) => String(v).length * 7 + 16)),
        },
      ],
      series: [
        { label: timeZoneLabel(), value: (_u, v) => (v == null ? "—" : formatDateTime(v * 1000)) },
        ...current.lines.map((line, index) => ({
          label: line.label,
          stroke: line.color,
          width: line.bars ? 0 : 1.5,
          fill: line.bars ? line.color : undefined,
          dash: line.dash,
          paths: line.bars ? bars : undefined,
          points: { show: false },
          spanGaps: false,
          // The legend shows the line's own value, not the stacked height.
          value: (_u: uPlot, _v: number | null, _s: number, at: number | null) => {
            const padded = latest.current.data[0].length !== latest.current.lines[index]?.values.length;
            const own = at == null ? null : latest.current.lines[index]?.values[padded ? at - 1 : at];
            return own == null ? "—" : latest.current.format(own);
          },
        })),
      ],
      hooks: {
        draw: [(u) => {
          const ctx = u.ctx;
          const { left, top, width: w, height: h } = u.bbox;
          ctx.save();
          ctx.font = `${11 * devicePixelRatio}px sans-serif`;
          for (const threshold of latest.current.thresholds) {
            const y = u.valToPos(threshold.value, "y", true);
            if (y < top || y > top + h) continue;
            ctx.strokeStyle = threshold.color ?? "#c0392b";
            ctx.setLineDash([6 * devicePixelRatio, 4 * devicePixelRatio]);
            ctx.lineWidth = devicePixelRatio;
            ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(left + w, y); ctx.stroke();
            ctx.fillStyle = threshold.color ?? "#c0392b";
            ctx.fillText(threshold.label, left + 4 * devicePixelRatio, y - 3 * devicePixelRatio);
          }
          ctx.setLineDash([]);
          for (const mark of latest.current.marks) {
            const x = u.valToPos(mark.at, "x", true);
            if (x < left || x > left + w) continue;
            ctx.strokeStyle = mark.color ?? "#8e44ad";
            ctx.lineWidth = 1.5 * devicePixelRatio;
            ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + h); ctx.stroke();
            ctx.fillStyle = mark.color ?? "#8e44ad";
            ctx.fillText(mark.label, x + 3 * devicePixelRatio, top + 12 * devicePixelRatio);
          }
          ctx.restore();
        }],
      },
    };
    plot.current = new uPlot(options, current.data, element);
    return () => {
      plot.current?.destroy();
      plot.current = null;
    };
    // Rebuilt when the size or the set of lines changes; new data alone goes through setData.
  }, [width, height, shape, yMin, yMax, stack, integer]);

  const summary = chartSummary(lines, format);
  const points = times.length;
  return (
    <figure className="chart" data-testid={testId} data-points={points}>
      <div ref={frame} className="chart__frame">
        <div ref={canvas} role="img" aria-label={`${label}. ${summary}`} />
      </div>
      <figcaption className="chart__caption small muted">
        {thresholds.length || marks.length ? (
          <span className="chart__legend-extra">
            {thresholds.map((t) => <span key={`t${t.label}`} className="chart__threshold">┄ {t.label}</span>)}
            {marks.length ? <span className="chart__marks" data-testid={testId ? `${testId}-marks` : undefined}>│ {marks.length} × {[...new Set(marks.map((m) => m.label))].slice(0, 6).join(", ")}</span> : null}
          </span>
        ) : null}
        <span className="visually-hidden">{summary}</span>
      </figcaption>
    </figure>
  );
}
