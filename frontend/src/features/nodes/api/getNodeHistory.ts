import { useQuery } from "@tanstack/react-query";
import { asList, client, unwrap } from "@/shared/api/client";
import type { ChangeLogEntry, NodeEvent } from "../types/telemetry";

export function getNodeEvents(id: number): Promise<NodeEvent[]> {
  return unwrap(client.GET("/api/v1/events/", { params: { query: { node: id, page_size: 50 } } })).then(asList);
}

/** The server answers the node's latest 200 changes, unpaginated. */
export function getNodeChanges(id: number): Promise<ChangeLogEntry[]> {
  return unwrap(client.GET("/api/v1/nodes/{id}/changes/", { params: { path: { id } } })).then(asList);
}

export function useNodeEvents(id: number) {
  return useQuery({ queryKey: ["nodes", id, "events"], queryFn: () => getNodeEvents(id) });
}

export function useNodeChanges(id: number) {
  return useQuery({ queryKey: ["nodes", id, "changes"], queryFn: () => getNodeChanges(id), refetchInterval: 15_000 });
}
