// The billing page's reads: cost report, pool what-if, expiring reserved terms, preemption rates and records.
import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { asList, client, unwrap } from "@/shared/api/client";

export const PREEMPTIONS_PAGE_SIZE = 25;
const SLOW = { refetchInterval: 60_000, staleTime: 30_000 } as const;

export function useCostReportFor(periodDays: number) {
  return useQuery({ queryKey: ["cost-report", periodDays], ...SLOW, placeholderData: keepPreviousData,
    queryFn: () => unwrap(client.GET("/api/v1/cost-report/", { params: { query: { period_days: periodDays } } })) });
}

/** The CSV download of the same report (a plain link: the browser saves the file, the session cookie goes along). */
export function costReportCsvUrl(periodDays: number): string {
  return `/api/v1/cost-report.csv?period_days=${encodeURIComponent(String(periodDays))}`;
}

export function usePools() {
  return useQuery({ queryKey: ["pools", "all"], ...SLOW,
    queryFn: () => unwrap(client.GET("/api/v1/pools/", { params: { query: { page_size: 200 } } })).then(asList) });
}

export interface WhatIfInput {
  spotRate: string;
  bareMetalPrice: string;
}

export function usePoolWhatIf(poolId: number | null, input: WhatIfInput) {
  return useQuery({
    queryKey: ["pools", poolId, "what-if", input],
    enabled: poolId !== null,
    retry: false,
    queryFn: () => unwrap(client.GET("/api/v1/pools/{id}/what-if/", { params: {
      path: { id: poolId as number },
      query: {
        spot_preemption_rate: input.spotRate.trim() || undefined,
        bare_metal_price: input.bareMetalPrice.trim() ? Number(input.bareMetalPrice) : undefined,
      },
    } })),
  });
}

export function useExpiringTerms(withinDays: number) {
  return useQuery({ queryKey: ["expiring-terms", withinDays], ...SLOW,
    queryFn: () => unwrap(client.GET("/api/v1/expiring-reserved-terms/", { params: { query: { within_days: withinDays } } })) });
}

export function usePreemptionRates(groupBy: "pool" | "site" | "instance_type") {
  return useQuery({ queryKey: ["preemption-rates", groupBy], ...SLOW,
    queryFn: () => unwrap(client.GET("/api/v1/preemption-rates/", { params: { query: { group_by: groupBy } } })) });
}

export function usePreemptionRecords(page: number) {
  return useQuery({ queryKey: ["preemptions", "page", page], ...SLOW, placeholderData: keepPreviousData,
    queryFn: () => unwrap(client.GET("/api/v1/preemptions/", { params: { query: { page, page_size: PREEMPTIONS_PAGE_SIZE, ordering: ["-at"] } } })) });
}
