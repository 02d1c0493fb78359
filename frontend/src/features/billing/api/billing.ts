import { useQuery } from "@tanstack/react-query";
import { client, unwrap } from "@/shared/api/client";
import type { CostReport, NodeBilling } from "../types/billing";

export function getNodeBilling(nodeId: number): Promise<NodeBilling> {
  return unwrap(client.GET("/api/v1/nodes/{id}/billing/", { params: { path: { id: nodeId } } }));
}

export function useNodeBilling(nodeId: number) {
  return useQuery({ queryKey: ["nodes", nodeId, "billing"], queryFn: () => getNodeBilling(nodeId), refetchInterval: 30_000 });
}

export function getCostReport(): Promise<CostReport> {
  return unwrap(client.GET("/api/v1/cost-report/"));
}

export function useCostReport() {
  return useQuery({ queryKey: ["cost-report"], queryFn: getCostReport, refetchInterval: 60_000 });
}
