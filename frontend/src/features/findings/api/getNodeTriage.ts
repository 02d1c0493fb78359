import { useQuery } from "@tanstack/react-query";
import { API_BASE, api } from "@/shared/api/client";
import type { Triage } from "../types/findings";

export function getNodeTriage(nodeId: number): Promise<Triage> {
  return api.get<Triage>(`nodes/${nodeId}/triage/`);
}

export function useNodeTriage(nodeId: number) {
  return useQuery({ queryKey: ["nodes", nodeId, "triage"], queryFn: () => getNodeTriage(nodeId) });
}

/** The evidence bundle a provider's support desk asks for; the browser downloads it with the session cookie. */
export function evidenceUrl(nodeId: number, format: "json" | "text"): string {
  return `${API_BASE}/nodes/${nodeId}/evidence/?format=${format}`;
}
