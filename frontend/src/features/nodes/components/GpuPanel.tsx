// GPUs: inventory joined with the latest reading, and one-hour sparklines of utilisation and temperature.
import { useTranslation } from "react-i18next";
import type { GPU } from "@/shared/api/types";
import { formatBytes, formatNumber, formatPercent } from "@/shared/lib/format";
import { seriesStats, type Point } from "@/shared/lib/series";
import { Badge } from "@/shared/ui/Badge";
import { Panel } from "@/shared/ui/Panel";
import { Empty, ErrorState, Loading } from "@/shared/ui/QueryState";
import { Sparkline } from "@/shared/ui/Sparkline";
import { useNodeGpus } from "../api/getNode";
import { useNodeStatus } from "../api/getNodeStatus";
import { useSeries } from "../api/getSeries";
import type { GpuLiveStatus } from "../types/telemetry";

/** Match a live reading to an inventory GPU by id, then UUID, then index. */
export function liveFor(gpu: GPU, live: GpuLiveStatus[] | undefined): GpuLiveStatus | undefined {
  if (!live) return undefined;
  return (
    live.find((s) => s.gpu === gpu.id) ??
    live.find((s) => s.uuid && s.uuid === gpu.uuid) ??
    live.find((s) => s.index === gpu.index)
  );
}

const GPU_METRICS = ["utilization_gpu_pct", "temperature_c"];

/** The active clock-event reasons by name; the schema types the stored JSON as unknown, so check it. */
function clockEventReasons(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((r): r is string => typeof r === "string" && r !== "GpuIdle") : [];
}

function GpuSpark({ points, label, max, pending }: { points: Point[] | undefined; label: string; max?: number; pending: boolean }) {
  const { t } = useTranslation();
  if (!points?.length) return <span className="muted small">{pending ? "…" : t("gpu.noHistory")}</span>;
  const stats = seriesStats(points);
  return (
    <Sparkline points={points} min={0} max={max} width={120} height={28}
      label={t("gpu.sparkAria", { metric: label, min: formatNumber(stats.min, 1), max: formatNumber(stats.max, 1), last: formatNumber(stats.last, 1) })} />
  );
}

function GpuRow({ gpu, live }: { gpu: GPU; live: GpuLiveStatus | undefined }) {
  const { t } = useTranslation();
  const series = useSeries("gpus", gpu.id, GPU_METRICS);
  const s = live;
  const pcieDegraded = s?.pcie_gen_current != null && s?.pcie_gen_max != null &&
    (s.pcie_gen_current < s.pcie_gen_max || (s.pcie_width_current ?? 0) < (s.pcie_width_max ?? 0));
  return (
    <tr className={s?.lost || !gpu.present ? "row--bad" : undefined}>
      <td>{gpu.index}</td>
      <td>
        {gpu.model || "—"}
        <div className="muted small">{gpu.pci_bus_id} · {formatBytes(gpu.memory_total_bytes)}</div>
        {s?.lost || !gpu.present ? <Badge tone="bad">{t("gpu.lost")}</Badge> : null}
      </td>
      <td>{formatPercent(s?.utilization_gpu_pct)}</td>
      <td><GpuSpark points={series.data?.utilization_gpu_pct} pending={series.isPending} label={t("gpu.util")} max={100} /></td>
      <td>{s?.memory_used_bytes != null ? `${formatBytes(s.memory_used_bytes)} / ${formatBytes(s.memory_total_bytes ?? gpu.memory_total_bytes)}` : "—"}</td>
      <td>{s?.temperature_c != null ? `${formatNumber(s.temperature_c)} °C` : "—"}</td>
      <td><GpuSpark points={series.data?.temperature_c} pending={series.isPending} label={t("gpu.temp")} /></td>
      <td>{s?.power_draw_w != null ? `${formatNumber(s.power_draw_w)} / ${formatNumber(s.power_limit_w)} W` : "—"}</td>
      <td className={pcieDegraded ? "cell--warn" : undefined}>
        {s?.pcie_gen_current != null ? `Gen${s.pcie_gen_current}/${s.pcie_gen_max ?? "?"} x${s.pcie_width_current ?? "?"}/${s.pcie_width_max ?? "?"}` : "—"}
      </td>
      <td className={(s?.ecc_volatile_uncorrected ?? 0) > 0 ? "cell--bad" : undefined}>
        {s?.ecc_volatile_uncorrected != null ? formatNumber(s.ecc_volatile_uncorrected) : "—"}
        {s?.remapped_rows_pending || s?.retired_pages_pending ? <div><Badge tone="warn">{t("gpu.resetPending")}</Badge></div> : null}
        {s?.remapped_rows_failure ? <div><Badge tone="bad">{t("gpu.remapFailure")}</Badge></div> : null}
      </td>
      <td>{clockEventReasons(s?.clock_event_reasons).join(", ") || "—"}</td>
      <td>{s ? formatNumber(s.process_count ?? 0) : "—"}</td>
    </tr>
  );
}

export function GpuPanel({ nodeId }: { nodeId: number }) {
  const { t } = useTranslation();
  const gpus = useNodeGpus(nodeId);
  const status = useNodeStatus(nodeId);
  const live = status.data?.gpus;

  let body;
  if (gpus.isPending) body = <Loading />;
  else if (gpus.isError && !gpus.data) body = <ErrorState error={gpus.error} onRetry={() => void gpus.refetch()} />;
  else if (!gpus.data?.length) body = <Empty>{t("gpu.none")}</Empty>;
  else {
    body = (
      <div className="table-wrap">
        <table className="table table--compact" data-testid="gpu-table">
          <caption className="visually-hidden">{t("gpu.caption")}</caption>
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">{t("gpu.model")}</th>
              <th scope="col">{t("gpu.util")}</th>
              <th scope="col">{t("gpu.utilHour")}</th>
              <th scope="col">{t("gpu.memory")}</th>
              <th scope="col">{t("gpu.temp")}</th>
              <th scope="col">{t("gpu.tempHour")}</th>
              <th scope="col">{t("gpu.power")}</th>
              <th scope="col">{t("gpu.pcie")}</th>
              <th scope="col">{t("gpu.ecc")}</th>
              <th scope="col">{t("gpu.throttle")}</th>
              <th scope="col">{t("gpu.processes")}</th>
            </tr>
          </thead>
          <tbody>
            {gpus.data.map((gpu) => <GpuRow key={gpu.id} gpu={gpu} live={liveFor(gpu, live)} />)}
          </tbody>
        </table>
        {status.isError && !status.data ? <p className="muted small">{t("gpu.noLive")}</p> : null}
      </div>
    );
  }
  return <Panel title={t("gpu.title")} testId="gpu-panel">{body}</Panel>;
}
