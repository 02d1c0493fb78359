import { useQuery } from "@tanstack/react-query";
import { api } from "@/shared/api/client";
import type { NodeLiveStatus } from "../types/telemetry";

export function getNodeStatus(id: number): Promise<NodeLiveStatus> {
  return api.get<NodeLiveStatus>(`nodes/${id}/status/`);
}

export function useNodeStatus(id: number) {
  return useQuery({ queryKey: ["nodes", id, "status"], queryFn: () => getNodeStatus(id) });
}
