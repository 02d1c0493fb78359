import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { asList, client, unwrap } from "@/shared/api/client";
import type { Schemas } from "@/shared/api/types";

export type RuleOverride = Schemas["RuleOverride"];
export type RuleOverrideInput = Schemas["RuleOverrideRequest"];
const key = ["rule-overrides"] as const;

export function useRuleOverrides() {
  return useQuery({ queryKey: key, refetchInterval: 60_000,
    queryFn: () => unwrap(client.GET("/api/v1/rule-overrides/", { params: { query: { page_size: 500 } } })).then(asList) });
}

/** Pools to pick from (the rules feature reads them itself; features do not import each other). */
export function usePoolChoices() {
  return useQuery({ queryKey: ["pools", "all"], refetchInterval: 60_000,
    queryFn: () => unwrap(client.GET("/api/v1/pools/", { params: { query: { page_size: 200 } } })).then(asList) });
}

export function useCreateRuleOverride() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (body: RuleOverrideInput) => unwrap(client.POST("/api/v1/rule-overrides/", { body })),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: key }),
  });
}

/** PUT, not PATCH: the form sends the whole override, so a parameter taken out of the JSON is dropped (a PATCH
 * merges the parameters it sends into the stored ones). */
export function useUpdateRuleOverride() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: ({ id, body }: { id: number; body: RuleOverrideInput }) =>
      unwrap(client.PUT("/api/v1/rule-overrides/{id}/", { params: { path: { id } }, body })),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: key }),
  });
}

export function useDeleteRuleOverride() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (id: number) => unwrap(client.DELETE("/api/v1/rule-overrides/{id}/", { params: { path: { id } } })),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: key }),
  });
}
