import { useQuery } from "@tanstack/react-query";
import { api, asList, type Page } from "@/shared/api/client";
import type { NodeDrift, SoftwareStack } from "@/shared/api/types";

export function getNodeDrift(id: number): Promise<NodeDrift> {
  return api.get<NodeDrift>(`nodes/${id}/drift/`);
}

export function getNodeStacks(id: number): Promise<SoftwareStack[]> {
  return api.get<SoftwareStack[] | Page<SoftwareStack>>(`nodes/${id}/stacks/`).then(asList);
}

export function useNodeDrift(id: number) {
  return useQuery({ queryKey: ["nodes", id, "drift"], queryFn: () => getNodeDrift(id), refetchInterval: 15_000 });
}

export function useNodeStacks(id: number) {
  return useQuery({ queryKey: ["nodes", id, "stacks"], queryFn: () => getNodeStacks(id), refetchInterval: 15_000 });
}
