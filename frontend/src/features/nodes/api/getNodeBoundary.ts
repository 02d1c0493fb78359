import { useQuery } from "@tanstack/react-query";
import { api, asList, type Page } from "@/shared/api/client";
import type { BoundaryCell } from "@/shared/api/types";

export function getNodeBoundary(id: number): Promise<BoundaryCell[]> {
  return api.get<BoundaryCell[] | Page<BoundaryCell>>(`nodes/${id}/boundary/`).then(asList);
}

export function useNodeBoundary(id: number) {
  return useQuery({ queryKey: ["nodes", id, "boundary"], queryFn: () => getNodeBoundary(id), refetchInterval: 30_000 });
}
