import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { api, asList, type Page } from "@/shared/api/client";
import type { EnrollmentToken, EnrollmentTokenCreated, EnrollmentTokenInput } from "../types/tokens";

export function getEnrollmentTokens(): Promise<EnrollmentToken[]> {
  return api.get<EnrollmentToken[] | Page<EnrollmentToken>>("enrollment-tokens/", { page_size: 100 }).then(asList);
}

export function useEnrollmentTokens(enabled = true) {
  return useQuery({ queryKey: ["enrollment-tokens"], queryFn: getEnrollmentTokens, enabled, refetchInterval: 15_000 });
}

export function createEnrollmentToken(input: EnrollmentTokenInput): Promise<EnrollmentTokenCreated> {
  return api.post<EnrollmentTokenCreated>("enrollment-tokens/", input);
}

export function useCreateEnrollmentToken() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: createEnrollmentToken,
    onSuccess: () => void client.invalidateQueries({ queryKey: ["enrollment-tokens"] }),
  });
}

export function revokeEnrollmentToken(id: number): Promise<EnrollmentToken> {
  return api.post<EnrollmentToken>(`enrollment-tokens/${id}/revoke/`);
}

export function useRevokeEnrollmentToken() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: revokeEnrollmentToken,
    onSuccess: () => void client.invalidateQueries({ queryKey: ["enrollment-tokens"] }),
  });
}
