import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { client, unwrap, type Page, type QueryOf } from "@/shared/api/client";
import type { Finding } from "../types/findings";

export type FindingListParams = QueryOf<"/api/v1/findings/">;

export function getFindings(params: FindingListParams): Promise<Page<Finding>> {
  return unwrap(client.GET("/api/v1/findings/", { params: { query: params } })).then((data: Page<Finding> | Finding[]) =>
    Array.isArray(data) ? { count: data.length, results: data } : data,
  );
}

export function useFindings(params: FindingListParams) {
  return useQuery({
    queryKey: ["findings", params],
    queryFn: () => getFindings(params),
    placeholderData: keepPreviousData,
  });
}

/** A node's active findings, for its boundary matrix. */
export function useNodeFindings(nodeId: number) {
  return useFindings({ node: nodeId, state: ["open"], page_size: 200 });
}
