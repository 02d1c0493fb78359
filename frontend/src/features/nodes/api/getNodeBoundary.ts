import { useQuery } from "@tanstack/react-query";
import { asList, client, unwrap } from "@/shared/api/client";
import type { BoundaryCell } from "@/shared/api/types";

export function getNodeBoundary(id: number): Promise<BoundaryCell[]> {
  return unwrap(client.GET("/api/v1/nodes/{id}/boundary/", { params: { path: { id } } })).then(asList);
}

export function useNodeBoundary(id: number) {
  return useQuery({ queryKey: ["nodes", id, "boundary"], queryFn: () => getNodeBoundary(id), refetchInterval: 30_000 });
}
