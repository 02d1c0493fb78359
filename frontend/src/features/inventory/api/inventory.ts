// Providers, sites, baselines and boundary overrides: lists and the writes operators make.
import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { asList, client, unwrap } from "@/shared/api/client";
import type { Schemas } from "@/shared/api/types";

export type Provider = Schemas["Provider"];
export type ProviderInput = Schemas["ProviderRequest"];
export type Site = Schemas["Site"];
export type SiteInput = Schemas["SiteRequest"];
export type Baseline = Schemas["Baseline"];
export type BaselineInput = Schemas["BaselineRequest"];
export type BoundaryOverride = Schemas["BoundaryOverride"];
export type BoundaryOverrideInput = Schemas["BoundaryOverrideRequest"];

const ALL = { page_size: 500 } as const;

export function useProviders() {
  return useQuery({ queryKey: ["providers", "all"], refetchInterval: 60_000,
    queryFn: () => unwrap(client.GET("/api/v1/providers/", { params: { query: { ...ALL, ordering: ["name"] } } })).then(asList) });
}

export function useSites() {
  return useQuery({ queryKey: ["sites", "all"], refetchInterval: 60_000,
    queryFn: () => unwrap(client.GET("/api/v1/sites/", { params: { query: { ...ALL, ordering: ["name"] } } })).then(asList) });
}

export function useInventoryPools() {
  return useQuery({ queryKey: ["pools", "all"], refetchInterval: 60_000,
    queryFn: () => unwrap(client.GET("/api/v1/pools/", { params: { query: { page_size: 200 } } })).then(asList) });
}

export function useBaselines() {
  return useQuery({ queryKey: ["baselines", "all"], refetchInterval: 60_000, placeholderData: keepPreviousData,
    queryFn: () => unwrap(client.GET("/api/v1/baselines/", { params: { query: { ...ALL, ordering: ["name"] } } })).then(asList) });
}

export function useBoundaryOverrides() {
  return useQuery({ queryKey: ["boundary-overrides", "all"], refetchInterval: 60_000,
    queryFn: () => unwrap(client.GET("/api/v1/boundary-overrides/", { params: { query: ALL } })).then(asList) });
}

function useInvalidating<A, R>(keys: string[], fn: (args: A) => Promise<R>) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: fn,
    onSuccess: () => { for (const key of keys) void queryClient.invalidateQueries({ queryKey: [key] }); },
  });
}

export const useCreateProvider = () => useInvalidating(["providers"], (body: ProviderInput) => unwrap(client.POST("/api/v1/providers/", { body })));
export const useUpdateProvider = () => useInvalidating(["providers"], ({ id, body }: { id: number; body: Schemas["PatchedProviderRequest"] }) =>
  unwrap(client.PATCH("/api/v1/providers/{id}/", { params: { path: { id } }, body })));
export const useDeleteProvider = () => useInvalidating(["providers", "sites"], (id: number) =>
  unwrap(client.DELETE("/api/v1/providers/{id}/", { params: { path: { id } } })));
export const useUpdateSite = () => useInvalidating(["sites"], ({ id, body }: { id: number; body: Schemas["PatchedSiteRequest"] }) =>
  unwrap(client.PATCH("/api/v1/sites/{id}/", { params: { path: { id } }, body })));
export const useDeleteSite = () => useInvalidating(["sites"], (id: number) =>
  unwrap(client.DELETE("/api/v1/sites/{id}/", { params: { path: { id } } })));
export const useCreateSite = () => useInvalidating(["sites"], (body: SiteInput) => unwrap(client.POST("/api/v1/sites/", { body })));
export const useCreateBaseline = () => useInvalidating(["baselines"], (body: BaselineInput) => unwrap(client.POST("/api/v1/baselines/", { body })));
export const useUpdateBaseline = () => useInvalidating(["baselines"], ({ id, body }: { id: number; body: Schemas["PatchedBaselineRequest"] }) =>
  unwrap(client.PATCH("/api/v1/baselines/{id}/", { params: { path: { id } }, body })));
export const useDeleteBaseline = () => useInvalidating(["baselines"], (id: number) =>
  unwrap(client.DELETE("/api/v1/baselines/{id}/", { params: { path: { id } } })));
export const useCreateBoundaryOverride = () => useInvalidating(["boundary-overrides", "nodes"], (body: BoundaryOverrideInput) =>
  unwrap(client.POST("/api/v1/boundary-overrides/", { body })));
export const useUpdateBoundaryOverride = () => useInvalidating(["boundary-overrides", "nodes"],
  ({ id, body }: { id: number; body: Schemas["PatchedBoundaryOverrideRequest"] }) =>
    unwrap(client.PATCH("/api/v1/boundary-overrides/{id}/", { params: { path: { id } }, body })));
export const useDeleteBoundaryOverride = () => useInvalidating(["boundary-overrides", "nodes"], (id: number) =>
  unwrap(client.DELETE("/api/v1/boundary-overrides/{id}/", { params: { path: { id } } })));
