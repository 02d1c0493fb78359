import { useQuery } from "@tanstack/react-query";
import { asList, client, unwrap } from "@/shared/api/client";
import type { NodeDrift, SoftwareStack } from "@/shared/api/types";

export function getNodeDrift(id: number): Promise<NodeDrift> {
  return unwrap(client.GET("/api/v1/nodes/{id}/drift/", { params: { path: { id } } }));
}

export function getNodeStacks(id: number): Promise<SoftwareStack[]> {
  return unwrap(client.GET("/api/v1/nodes/{id}/stacks/", { params: { path: { id } } })).then(asList);
}

export function useNodeDrift(id: number) {
  return useQuery({ queryKey: ["nodes", id, "drift"], queryFn: () => getNodeDrift(id), refetchInterval: 15_000 });
}

export function useNodeStacks(id: number) {
  return useQuery({ queryKey: ["nodes", id, "stacks"], queryFn: () => getNodeStacks(id), refetchInterval: 15_000 });
}
