import { useQuery } from "@tanstack/react-query";
import { client, unwrap } from "@/shared/api/client";
import type { NodeLiveStatus } from "../types/telemetry";

export function getNodeStatus(id: number): Promise<NodeLiveStatus> {
  return unwrap(client.GET("/api/v1/nodes/{id}/status/", { params: { path: { id } } }));
}

export function useNodeStatus(id: number) {
  return useQuery({ queryKey: ["nodes", id, "status"], queryFn: () => getNodeStatus(id) });
}
