import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { client, unwrap } from "@/shared/api/client";
import type { ApiToken, ApiTokenCreated, ApiTokenInput } from "../types/tokens";

export const TOKENS_PAGE_SIZE = 50;
const tokensKey = ["tokens"] as const;

/** The caller's tokens; an admin gets everyone's (the server decides). */
export function getTokens(page: number) {
  return unwrap(client.GET("/api/v1/tokens/", { params: { query: { page, page_size: TOKENS_PAGE_SIZE } } }));
}

export function useTokens(page: number) {
  return useQuery({
    queryKey: [...tokensKey, page],
    queryFn: () => getTokens(page),
    placeholderData: keepPreviousData,
    refetchInterval: 30_000,
  });
}

export function createToken(input: ApiTokenInput): Promise<ApiTokenCreated> {
  return unwrap(client.POST("/api/v1/tokens/", { body: input }));
}

export function useCreateToken() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: createToken,
    // The list is refetched, never fed the create response: the key must live only in the mutation's state.
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: tokensKey }),
  });
}

export function revokeToken(id: number): Promise<ApiToken> {
  return unwrap(client.POST("/api/v1/tokens/{id}/revoke/", { params: { path: { id } } }));
}

export function useRevokeToken() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: revokeToken,
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: tokensKey }),
  });
}
