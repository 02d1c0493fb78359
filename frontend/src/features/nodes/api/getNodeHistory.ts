import { useQuery } from "@tanstack/react-query";
import { api, asList, type Page } from "@/shared/api/client";
import type { ChangeLogEntry, NodeEvent } from "../types/telemetry";

export function getNodeEvents(id: number): Promise<NodeEvent[]> {
  return api.get<NodeEvent[] | Page<NodeEvent>>("events/", { node: id, page_size: 50 }).then(asList);
}

export function getNodeChanges(id: number): Promise<ChangeLogEntry[]> {
  return api.get<ChangeLogEntry[] | Page<ChangeLogEntry>>(`nodes/${id}/changes/`, { page_size: 50 }).then(asList);
}

export function useNodeEvents(id: number) {
  return useQuery({ queryKey: ["nodes", id, "events"], queryFn: () => getNodeEvents(id) });
}

export function useNodeChanges(id: number) {
  return useQuery({ queryKey: ["nodes", id, "changes"], queryFn: () => getNodeChanges(id), refetchInterval: 15_000 });
}
