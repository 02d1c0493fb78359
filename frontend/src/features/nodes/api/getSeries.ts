import { useQuery } from "@tanstack/react-query";
import { client, unwrap } from "@/shared/api/client";
import { normaliseSeriesSet, type Point } from "@/shared/lib/series";

const HOUR_S = 3600;

/** The last hour of some metrics at one-minute steps, for a node or a GPU, in one request. */
export function getSeries(kind: "nodes" | "gpus", id: number, metrics: string[], now = Date.now()): Promise<Record<string, Point[]>> {
  const end = new Date(now);
  const start = new Date(now - HOUR_S * 1000);
  const init = {
    params: { path: { id }, query: { metric: metrics, start: start.toISOString(), end: end.toISOString(), step: 60 } },
  };
  const call = kind === "nodes" ? client.GET("/api/v1/nodes/{id}/series/", init) : client.GET("/api/v1/gpus/{id}/series/", init);
  return unwrap(call).then((data) => normaliseSeriesSet(data, metrics));
}

export function useSeries(kind: "nodes" | "gpus", id: number | undefined, metrics: string[]) {
  return useQuery({
    queryKey: [kind, id, "series", metrics],
    queryFn: () => getSeries(kind, id as number, metrics),
    enabled: id !== undefined,
    refetchInterval: 30_000,
    staleTime: 15_000,
  });
}
