import { useQuery } from "@tanstack/react-query";
import { API_BASE, client, unwrap, type QueryOf } from "@/shared/api/client";
import type { Triage } from "../types/findings";

export function getNodeTriage(nodeId: number): Promise<Triage> {
  return unwrap(client.GET("/api/v1/nodes/{node_id}/triage/", { params: { path: { node_id: nodeId } } }));
}

export function useNodeTriage(nodeId: number) {
  return useQuery({ queryKey: ["nodes", nodeId, "triage"], queryFn: () => getNodeTriage(nodeId) });
}

type EvidenceFormat = NonNullable<QueryOf<"/api/v1/nodes/{node_id}/evidence/">["format"]>;

/** The evidence bundle a provider's support desk asks for; the browser downloads it with the session cookie
 * (a link, not a fetch, so the file lands in the downloads folder). */
export function evidenceUrl(nodeId: number, format: EvidenceFormat): string {
  return `${API_BASE}/nodes/${nodeId}/evidence/?format=${format}`;
}
