import { useQuery } from "@tanstack/react-query";
import { api } from "@/shared/api/client";
import type { CostReport, NodeBilling } from "../types/billing";

export function getNodeBilling(nodeId: number): Promise<NodeBilling> {
  return api.get<NodeBilling>(`nodes/${nodeId}/billing/`);
}

export function useNodeBilling(nodeId: number) {
  return useQuery({ queryKey: ["nodes", nodeId, "billing"], queryFn: () => getNodeBilling(nodeId), refetchInterval: 30_000 });
}

export function getCostReport(): Promise<CostReport> {
  return api.get<CostReport>("cost-report/");
}

export function useCostReport() {
  return useQuery({ queryKey: ["cost-report"], queryFn: getCostReport, refetchInterval: 60_000 });
}
