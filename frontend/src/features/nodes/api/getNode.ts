import { useQuery } from "@tanstack/react-query";
import { api, asList, type Page } from "@/shared/api/client";
import type { GPU, Node } from "@/shared/api/types";

export function getNode(id: number): Promise<Node> {
  return api.get<Node>(`nodes/${id}/`);
}

export function useNode(id: number) {
  return useQuery({ queryKey: ["nodes", id], queryFn: () => getNode(id) });
}

export function getNodeGpus(id: number): Promise<GPU[]> {
  return api.get<Page<GPU>>("gpus/", { node: id, page_size: 100 }).then(asList);
}

export function useNodeGpus(id: number) {
  return useQuery({ queryKey: ["nodes", id, "gpus"], queryFn: () => getNodeGpus(id) });
}
