import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { asList, client, unwrap } from "@/shared/api/client";
import type { EnrollmentToken, EnrollmentTokenCreated, EnrollmentTokenInput } from "../types/tokens";

export function getEnrollmentTokens(): Promise<EnrollmentToken[]> {
  return unwrap(client.GET("/api/v1/enrollment-tokens/", { params: { query: { page_size: 100 } } })).then(asList);
}

export function useEnrollmentTokens(enabled = true) {
  return useQuery({ queryKey: ["enrollment-tokens"], queryFn: getEnrollmentTokens, enabled, refetchInterval: 15_000 });
}

export function createEnrollmentToken(input: EnrollmentTokenInput): Promise<EnrollmentTokenCreated> {
  return unwrap(client.POST("/api/v1/enrollment-tokens/", { body: input }));
}

export function useCreateEnrollmentToken() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: createEnrollmentToken,
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ["enrollment-tokens"] }),
  });
}

export function revokeEnrollmentToken(id: number): Promise<EnrollmentToken> {
  return unwrap(client.POST("/api/v1/enrollment-tokens/{id}/revoke/", { params: { path: { id } } }));
}

export function useRevokeEnrollmentToken() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: revokeEnrollmentToken,
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ["enrollment-tokens"] }),
  });
}
