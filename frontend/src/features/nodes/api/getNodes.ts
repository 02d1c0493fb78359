import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { client, unwrap, type QueryOf } from "@/shared/api/client";

/** The nodes table's query: everything is done by the server (10,000 nodes never reach the browser). */
export type NodeListParams = QueryOf<"/api/v1/nodes/">;

export function getNodes(params: NodeListParams, signal?: AbortSignal) {
  return unwrap(client.GET("/api/v1/nodes/", { params: { query: params }, signal }));
}

export function useNodes(params: NodeListParams) {
  return useQuery({
    queryKey: ["nodes", "list", params],
    queryFn: ({ signal }) => getNodes(params, signal),
    placeholderData: keepPreviousData,
  });
}
