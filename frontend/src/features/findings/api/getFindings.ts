import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { api, type Page } from "@/shared/api/client";
import type { Finding } from "../types/findings";

export interface FindingListParams {
  page?: number;
  page_size?: number;
  node?: number | string;
  pool?: string;
  severity?: string;
  step?: string;
  layer?: string;
  responsible_party?: string;
  state?: string;
  search?: string;
  ordering?: string;
}

export function getFindings(params: FindingListParams): Promise<Page<Finding>> {
  return api.get<Page<Finding> | Finding[]>("findings/", { ...params }).then((data) =>
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
  return useFindings({ node: nodeId, state: "open", page_size: 200 });
}
