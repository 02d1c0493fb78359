import { useTranslation } from "react-i18next";
import { ApiError } from "@/shared/api/client";
import { formatBytes, formatNumber, formatPercent, formatRelative } from "@/shared/lib/format";
import { seriesStats, type Point } from "@/shared/lib/series";
import { Badge } from "@/shared/ui/Badge";
import { KeyValueList } from "@/shared/ui/KeyValueList";
import { Panel } from "@/shared/ui/Panel";
import { Empty, ErrorState, Loading, NotAvailable } from "@/shared/ui/QueryState";
import { Sparkline } from "@/shared/ui/Sparkline";
import { useNodeStatus } from "../api/getNodeStatus";
import { useSeries } from "../api/getSeries";

const NODE_METRICS = ["cpu_busy_pct", "gpu_util_avg_pct"];

function NodeSpark({ points, label }: { points: Point[] | undefined; label: string }) {
  const { t } = useTranslation();
  if (!points?.length) return null;
  const stats = seriesStats(points);
  return (
    <Sparkline points={points} min={0} max={100}
      label={t("gpu.sparkAria", { metric: label, min: formatNumber(stats.min, 1), max: formatNumber(stats.max, 1), last: formatNumber(stats.last, 1) })} />
  );
}

/** NVML keeps counting a GPU that fell off the bus: the report's count less the GPUs it marks lost. */
function GpusSeen({ count, lostGpus }: { count: number | null | undefined; lostGpus: unknown }) {
  const { t } = useTranslation();
  if (count == null) return <>—</>;
  const lost = Array.isArray(lostGpus) ? lostGpus.length : 0;
  if (!lost) return <>{formatNumber(count)}</>;
  return <span className="text-bad">{t("node.gpusSeenLost", { seen: formatNumber(Math.max(count - lost, 0)), lost })}</span>;
}

export function LiveStatusPanel({ nodeId }: { nodeId: number }) {
  const { t } = useTranslation();
  const status = useNodeStatus(nodeId);
  const series = useSeries("nodes", nodeId, NODE_METRICS);
  let body;
  if (status.isPending) body = <Loading />;
  else if (status.isError && !status.data) {
    if (status.error instanceof ApiError && status.error.isNotAvailable) body = <NotAvailable what={t("node.liveStatus")} />;
    else if (status.error instanceof ApiError && status.error.isNotFound) body = <Empty>{t("node.neverReported")}</Empty>;
    else body = <ErrorState error={status.error} onRetry={() => void status.refetch()} />;
  } else {
    const s = status.data!;
    const gpuUtils = (s.gpus ?? []).map((g) => g.utilization_gpu_pct).filter((v): v is number => typeof v === "number");
    const gpuUtilNow = gpuUtils.length ? gpuUtils.reduce((a, b) => a + b, 0) / gpuUtils.length : null;
    const memUsed = s.mem_total_bytes != null && s.mem_available_bytes != null ? s.mem_total_bytes - s.mem_available_bytes : null;
    body = (
      <>
        <div className="status-line">
          {s.silent ? <Badge tone="bad">{t("node.silent")}</Badge> : <Badge tone="good">{t("node.reporting")}</Badge>}
          <span className="muted">{t("node.lastReport", { when: formatRelative(s.received_at ?? s.collected_at) })}</span>
          {s.nvml_status && s.nvml_status !== "ok" ? <Badge tone="bad">NVML: {s.nvml_status}</Badge> : null}
          {s.notice_kind ? (
            <Badge tone="bad">{t("node.notice", { kind: s.notice_kind, when: formatRelative(s.notice_deadline) })}</Badge>
          ) : null}
        </div>
        <KeyValueList
          items={[
            [t("node.cpuBusy"), <span className="with-spark">{formatPercent(s.cpu_busy_pct)} <NodeSpark points={series.data?.cpu_busy_pct} label={t("node.cpuBusy")} /></span>],
            [t("node.gpuUtilAvg"), <span className="with-spark">{formatPercent(gpuUtilNow)} <NodeSpark points={series.data?.gpu_util_avg_pct} label={t("node.gpuUtilAvg")} /></span>],
            [t("node.cpuSteal"), formatPercent(s.cpu_steal_pct, 1)],
            [t("node.cpuIowait"), formatPercent(s.cpu_iowait_pct, 1)],
            [t("node.memory"), memUsed != null ? `${formatBytes(memUsed)} / ${formatBytes(s.mem_total_bytes)}` : "—"],
            [t("node.load1"), formatNumber(s.load1, 2)],
            [t("node.tcpRetrans"), formatPercent(s.tcp_retrans_pct, 2)],
            [t("node.gpusSeen"), <GpusSeen count={s.gpu_count_seen} lostGpus={s.lost_gpus} />],
            [t("node.checkpointAge"), s.checkpoint_age_s != null ? t("node.seconds", { count: Math.round(s.checkpoint_age_s) }) : "—"],
            [t("node.agentVersion"), s.agent_version || "—"],
          ]}
        />
      </>
    );
  }
  return <Panel title={t("node.liveStatus")} testId="live-status-panel">{body}</Panel>;
}
