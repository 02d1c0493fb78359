import { useQuery } from "@tanstack/react-query";
import { client, unwrap } from "@/shared/api/client";
import type { RangeName } from "@/shared/ui/RangePicker";

const SLOW = { refetchInterval: 60_000, staleTime: 30_000 } as const;

export function useFleetUtilisation(range: RangeName) {
  return useQuery({ queryKey: ["trends", "utilisation", range], ...SLOW,
    queryFn: () => unwrap(client.GET("/api/v1/fleet/utilisation/", { params: { query: { range } } })) });
}

export function useFindingTrend(range: RangeName) {
  return useQuery({ queryKey: ["trends", "findings", range], ...SLOW,
    queryFn: () => unwrap(client.GET("/api/v1/fleet/findings-trend/", { params: { query: { range } } })) });
}

export function useXidDaily(days: 7 | 30 | 90) {
  return useQuery({ queryKey: ["trends", "xid", days], ...SLOW,
    queryFn: () => unwrap(client.GET("/api/v1/fleet/xid-daily/", { params: { query: { days } } })) });
}

export function usePoolPreemptionDaily(days: number) {
  return useQuery({ queryKey: ["trends", "preemption-rates", "daily", days], ...SLOW,
    queryFn: () => unwrap(client.GET("/api/v1/preemption-rates/daily/", { params: { query: { days } } })) });
}

export function useCostHistory(months: number) {
  return useQuery({ queryKey: ["trends", "cost-history", months], ...SLOW,
    queryFn: () => unwrap(client.GET("/api/v1/cost-history/", { params: { query: { months } } })) });
}

export function useProviderScorecard(days: 7 | 30 | 90) {
  return useQuery({ queryKey: ["trends", "scorecard", days], ...SLOW,
    queryFn: () => unwrap(client.GET("/api/v1/provider-scorecard/", { params: { query: { days } } })) });
}
