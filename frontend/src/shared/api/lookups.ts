// Reference data many pages filter by: providers and pools (small lists, cached for a minute).
import { useQuery } from "@tanstack/react-query";
import { asList, client, unwrap } from "./client";
import type { Pool, Provider } from "./types";

export function getProviders(): Promise<Provider[]> {
  return unwrap(client.GET("/api/v1/providers/", { params: { query: { page_size: 500 } } })).then(asList);
}

export function getPools(): Promise<Pool[]> {
  return unwrap(client.GET("/api/v1/pools/", { params: { query: { page_size: 500 } } })).then(asList);
}

export function useProviders() {
  return useQuery({ queryKey: ["providers"], queryFn: getProviders, staleTime: 60_000, refetchInterval: 60_000 });
}

export function usePools() {
  return useQuery({ queryKey: ["pools"], queryFn: getPools, staleTime: 60_000, refetchInterval: 60_000 });
}
