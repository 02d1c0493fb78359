// Node and GPU charts over a picked range (1 h / 24 h / 7 d / 30 d), with the limits that matter drawn in:
// utilisation to 100 %, memory against the GPU's total, temperature against the board's slowdown threshold
// (where the hardware starts cutting clocks), power against its limit, and Xid / AER / GPU-lost
// events and rises of the uncorrectable ECC count as marks on the time axis. The PCIe link is shown as
// running vs capable (gen and width), red when it trained below what the slot and GPU can do.
import { useState } from "react";
import { useTranslation } from "react-i18next";
import { formatBytes, formatNumber, formatPercent } from "@/shared/lib/format";
import type { Point } from "@/shared/lib/series";
import { alignPoints } from "@/shared/lib/trend";
import { Badge } from "@/shared/ui/Badge";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import { RangePicker, type RangeName } from "@/shared/ui/RangePicker";
import { TimeChart, type Mark } from "@/shared/ui/TimeChart";
import { useChartEvents, useChartSeries } from "../api/getChartSeries";
import { useNodeStatus } from "../api/getNodeStatus";
import type { NodeEvent } from "../types/telemetry";

const NODE_METRICS = ["gpu_util_avg_pct", "cpu_busy_pct", "mem_used_pct"];
const GPU_METRICS = ["utilization_gpu_pct", "memory_used_bytes", "temperature_c", "power_draw_w", "ecc_volatile_uncorrected"];
const GIB = 1024 ** 3;

/** Marks for the events on the time axis (of one GPU when `gpuIndex` is given). */
export function eventMarks(events: NodeEvent[], gpuIndex?: number): Mark[] {
  return events
    .filter((event) => gpuIndex === undefined || event.gpu_index === gpuIndex || event.gpu_index == null)
    .map((event) => ({
      at: Date.parse(event.at) / 1000,
      label: event.kind === "xid" || event.kind === "sxid" ? `${event.kind === "xid" ? "Xid" : "SXid"} ${event.code ?? ""}`.trim()
        : event.kind === "aer" ? "AER" : "GPU lost",
      color: event.kind === "aer" ? "#d68910" : "#8e44ad",
    }));
}

/** A mark wherever the uncorrectable ECC count went up from one point to the next. */
export function eccMarks(points: Point[], label: string): Mark[] {
  const marks: Mark[] = [];
  let previous: number | null = null;
  for (const [at, value] of points) {
    if (value === null) continue;
    if (previous !== null && value > previous) marks.push({ at, label, color: "#c0392b" });
    previous = value;
  }
  return marks;
}

export function PcieLink({ gen, genMax, width, widthMax }: { gen?: number | null; genMax?: number | null; width?: number | null; widthMax?: number | null }) {
  const { t } = useTranslation();
  if (gen == null && width == null) return <span className="muted">{t("charts.pcieUnknown")}</span>;
  const degraded = (gen != null && genMax != null && gen < genMax) || (width != null && widthMax != null && width < widthMax);
  return (
    <span data-testid="pcie-link">
      {t("charts.pcieValue", { gen: gen ?? "?", width: width ?? "?", genMax: genMax ?? "?", widthMax: widthMax ?? "?" })}{" "}
      <Badge tone={degraded ? "bad" : "good"}>{degraded ? t("charts.pcieDegraded") : t("charts.pcieFull")}</Badge>
    </span>
  );
}

export function NodeChartsPanel({ nodeId }: { nodeId: number }) {
  const { t } = useTranslation();
  const [range, setRange] = useState<RangeName>("24h");
  const [gpuId, setGpuId] = useState<number | "">("");
  const status = useNodeStatus(nodeId);
  const gpus = status.data?.gpus ?? [];
  const gpu = gpus.find((g) => g.gpu === gpuId);
  const events = useChartEvents(nodeId, range);
  return (
    <Panel title={t("charts.title")} testId="node-charts" className="panel--wide"
      actions={(
        <>
          <label className="field field--inline">
            <span>{t("charts.gpu")}</span>
            <select value={gpuId} onChange={(e) => setGpuId(e.target.value === "" ? "" : Number(e.target.value))} data-testid="chart-gpu-select">
              <option value="">{t("charts.wholeNode")}</option>
              {gpus.map((g) => <option key={g.gpu} value={g.gpu}>{t("charts.gpuN", { index: g.index })}</option>)}
            </select>
          </label>
          <RangePicker value={range} onChange={setRange} testId="node-chart-range" />
        </>
      )}>
      {gpu ? <GpuCharts gpuId={gpu.gpu} index={gpu.index} range={range} events={events.data ?? []}
        powerLimit={gpu.power_limit_w ?? null} slowdown={gpu.temperature_slowdown_c ?? null} memoryTotal={gpu.memory_total_bytes ?? null}
        pcie={<PcieLink gen={gpu.pcie_gen_current} genMax={gpu.pcie_gen_max} width={gpu.pcie_width_current} widthMax={gpu.pcie_width_max} />} />
        : <NodeCharts nodeId={nodeId} range={range} events={events.data ?? []} />}
    </Panel>
  );
}

function NodeCharts({ nodeId, range, events }: { nodeId: number; range: RangeName; events: NodeEvent[] }) {
  const { t } = useTranslation();
  const series = useChartSeries("nodes", nodeId, NODE_METRICS, range);
  return (
    <QueryState query={series} what={t("charts.title")}>
      {(data) => {
        const columns = alignPoints(data);
        return (
          <TimeChart testId="chart-node" label={t("charts.nodeUtil")} times={columns.times} yMin={0} yMax={100}
            format={(v) => formatPercent(v)} marks={eventMarks(events)}
            thresholds={[{ value: 100, label: t("charts.max100"), color: "#7f8c8d" }]}
            lines={[
              { label: t("charts.gpuUtilAvg"), color: "#2f6fb3", values: columns.values.gpu_util_avg_pct ?? [] },
              { label: t("charts.cpuBusy"), color: "#d68910", values: columns.values.cpu_busy_pct ?? [] },
              { label: t("charts.memUsed"), color: "#27ae60", values: columns.values.mem_used_pct ?? [] },
            ]} />
        );
      }}
    </QueryState>
  );
}

interface GpuChartsProps {
  gpuId: number;
  index: number;
  range: RangeName;
  events: NodeEvent[];
  powerLimit: number | null;
  slowdown: number | null;
  memoryTotal: number | null;
  pcie: React.ReactNode;
}

function GpuCharts({ gpuId, index, range, events, powerLimit, slowdown, memoryTotal, pcie }: GpuChartsProps) {
  const { t } = useTranslation();
  const series = useChartSeries("gpus", gpuId, GPU_METRICS, range);
  return (
    <QueryState query={series} what={t("charts.title")}>
      {(data) => {
        const columns = alignPoints(data);
        const marks = [...eventMarks(events, index), ...eccMarks(data.ecc_volatile_uncorrected ?? [], t("charts.eccMark"))];
        const memory = (columns.values.memory_used_bytes ?? []).map((v) => (v === null ? null : v / GIB));
        return (
          <div className="chart-grid" data-testid="gpu-charts">
            <p className="small"><strong>{t("charts.pcie")}:</strong> {pcie}</p>
            <div>
              <h3 className="panel__subtitle">{t("charts.utilisation")}</h3>
              <TimeChart testId="chart-gpu-util" label={t("charts.utilisation")} times={columns.times} yMin={0} yMax={100}
                format={(v) => formatPercent(v)} marks={marks}
                thresholds={[{ value: 100, label: t("charts.max100"), color: "#7f8c8d" }]}
                lines={[{ label: t("charts.utilisation"), color: "#2f6fb3", values: columns.values.utilization_gpu_pct ?? [] }]} />
            </div>
            <div>
              <h3 className="panel__subtitle">{t("charts.memory")}</h3>
              <TimeChart testId="chart-gpu-memory" label={t("charts.memory")} times={columns.times} yMin={0}
                format={(v) => formatBytes(v * GIB)} marks={marks}
                thresholds={memoryTotal ? [{ value: memoryTotal / GIB, label: t("charts.memoryTotal", { total: formatBytes(memoryTotal) }) }] : []}
                lines={[{ label: t("charts.memoryUsed"), color: "#16a085", values: memory }]} />
            </div>
            <div>
              <h3 className="panel__subtitle">{t("charts.temperature")}</h3>
              <TimeChart testId="chart-gpu-temperature" label={t("charts.temperature")} times={columns.times}
                format={(v) => `${formatNumber(v)} °C`} marks={marks}
                thresholds={slowdown ? [{ value: slowdown, label: t("charts.temperatureSlowdown", { value: slowdown }), color: "#e67e22" }] : []}
                lines={[{ label: t("charts.temperature"), color: "#c0392b", values: columns.values.temperature_c ?? [] }]} />
            </div>
            <div>
              <h3 className="panel__subtitle">{t("charts.power")}</h3>
              <TimeChart testId="chart-gpu-power" label={t("charts.power")} times={columns.times} yMin={0}
                format={(v) => `${formatNumber(v)} W`} marks={marks}
                thresholds={powerLimit ? [{ value: powerLimit, label: t("charts.powerLimit", { limit: formatNumber(powerLimit) }) }] : []}
                lines={[{ label: t("charts.powerDraw"), color: "#7d3c98", values: columns.values.power_draw_w ?? [] }]} />
            </div>
          </div>
        );
      }}
    </QueryState>
  );
}
