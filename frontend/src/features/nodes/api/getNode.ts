import { useQuery } from "@tanstack/react-query";
import { asList, client, unwrap } from "@/shared/api/client";
import type { GPU, Node } from "@/shared/api/types";

export function getNode(id: number): Promise<Node> {
  return unwrap(client.GET("/api/v1/nodes/{id}/", { params: { path: { id } } }));
}

export function useNode(id: number) {
  return useQuery({ queryKey: ["nodes", id], queryFn: () => getNode(id) });
}

export function getNodeGpus(id: number): Promise<GPU[]> {
  return unwrap(client.GET("/api/v1/gpus/", { params: { query: { node: id, page_size: 100 } } })).then(asList);
}

export function useNodeGpus(id: number) {
  return useQuery({ queryKey: ["nodes", id, "gpus"], queryFn: () => getNodeGpus(id) });
}
