// The fleet overview's numbers, from the telemetry app's /fleet/summary/.
import { useQuery } from "@tanstack/react-query";
import { client, unwrap } from "@/shared/api/client";
import type { Schemas } from "@/shared/api/types";

export type FleetSummary = Schemas["FleetSummary"];

export interface BreakdownEntry {
  value: string;
  count: number;
  /** A nodes-table filter that lists these nodes, when there is one. */
  filter?: Record<string, string>;
}

export interface Breakdown {
  name: "state" | "delivery_form" | "billing_mode" | "provider";
  entries: BreakdownEntry[];
}

/** The summary's by_* maps as sorted lists; states, forms and modes link to the filtered nodes table
 * (providers are keyed by name, which the nodes filter does not take). */
export function summaryBreakdowns(summary: FleetSummary): Breakdown[] {
  const entries = (map: Record<string, number>, filterKey?: string) =>
    Object.entries(map)
      .map(([value, count]) => ({ value, count, ...(filterKey && value !== "none" ? { filter: { [filterKey]: value } } : {}) }))
      .sort((a, b) => b.count - a.count);
  return [
    { name: "state", entries: entries(summary.by_state, "state") },
    { name: "delivery_form", entries: entries(summary.by_delivery_form, "delivery_form") },
    { name: "billing_mode", entries: entries(summary.by_billing_mode, "billing_mode") },
    { name: "provider", entries: entries(summary.by_provider) },
  ];
}

export function getFleetSummary(): Promise<FleetSummary> {
  return unwrap(client.GET("/api/v1/fleet/summary/"));
}

export function useFleetSummary() {
  return useQuery({ queryKey: ["fleet", "summary"], queryFn: getFleetSummary });
}
