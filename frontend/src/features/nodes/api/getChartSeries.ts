import { useQuery } from "@tanstack/react-query";
import { asList, client, unwrap } from "@/shared/api/client";
import { normaliseSeriesSet, type Point } from "@/shared/lib/series";
import { RANGE_SECONDS, type RangeName } from "@/shared/ui/RangePicker";
import type { NodeEvent } from "../types/telemetry";

function window(range: RangeName, now: number) {
  const { span, step } = RANGE_SECONDS[range];
  const end = Math.ceil(now / 1000 / step) * step;
  return { start: new Date((end - span) * 1000).toISOString(), end: new Date(end * 1000).toISOString(), step };
}

/** Metrics of a node or a GPU over a chart range, at the range's step (raw for 1 h, the rollups beyond). */
export function getChartSeries(kind: "nodes" | "gpus", id: number, metrics: string[], range: RangeName,
  now = Date.now()): Promise<Record<string, Point[]>> {
  const init = { params: { path: { id }, query: { metric: metrics, ...window(range, now) } } };
  const call = kind === "nodes" ? client.GET("/api/v1/nodes/{id}/series/", init) : client.GET("/api/v1/gpus/{id}/series/", init);
  return unwrap(call).then((data) => normaliseSeriesSet(data, metrics));
}

export function useChartSeries(kind: "nodes" | "gpus", id: number | undefined, metrics: string[], range: RangeName) {
  return useQuery({
    queryKey: [kind, id, "chart", metrics, range],
    queryFn: () => getChartSeries(kind, id as number, metrics, range),
    enabled: id !== undefined,
    refetchInterval: range === "1h" ? 30_000 : 120_000,
    staleTime: 15_000,
  });
}

/** Xid, SXid, AER and GPU-lost events of the node in the range: marks on the charts' time axis. */
export function useChartEvents(nodeId: number, range: RangeName) {
  return useQuery({
    queryKey: ["nodes", nodeId, "chart-events", range],
    queryFn: () => {
      const { start, end } = window(range, Date.now());
      return unwrap(client.GET("/api/v1/events/", { params: { query: {
        node: nodeId, kind: ["xid", "sxid", "aer", "gpu_lost"], since: start, until: end, page_size: 200,
      } } })).then(asList) as Promise<NodeEvent[]>;
    },
    refetchInterval: 60_000,
  });
}
