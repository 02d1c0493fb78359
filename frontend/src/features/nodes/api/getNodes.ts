import { keepPreviousData, useQuery } from "@tanstack/react-query";
import { api, type Page } from "@/shared/api/client";
import type { Node } from "@/shared/api/types";

/** The nodes table's query: everything is done by the server (10,000 nodes never reach the browser). */
export interface NodeListParams {
  page: number;
  page_size: number;
  search?: string;
  ordering?: string;
  provider?: string;
  provider_slug?: string;
  pool?: string;
  delivery_form?: string;
  billing_mode?: string;
  state?: string;
  silent?: string;
  label?: string;
}

export function getNodes(params: NodeListParams, signal?: AbortSignal): Promise<Page<Node>> {
  return api.get<Page<Node>>("nodes/", { ...params }, signal);
}

export function useNodes(params: NodeListParams) {
  return useQuery({
    queryKey: ["nodes", "list", params],
    queryFn: ({ signal }) => getNodes(params, signal),
    placeholderData: keepPreviousData,
  });
}
