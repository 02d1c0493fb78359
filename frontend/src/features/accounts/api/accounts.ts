import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { client, unwrap, type QueryOf } from "@/shared/api/client";
import type { Schemas } from "@/shared/api/types";

export const PAGE_SIZE = 50;
export type User = Schemas["User"];
export type UserInput = Schemas["UserRequest"];
export type AuditEntry = Schemas["AuditEntry"];
export type AuditQuery = QueryOf<"/api/v1/audit/">;

export function useUsers(page: number, search: string) {
  return useQuery({ queryKey: ["users", page, search], placeholderData: keepPreviousData,
    queryFn: () => unwrap(client.GET("/api/v1/users/", { params: { query: { page, page_size: PAGE_SIZE, search: search || undefined, ordering: ["username"] } } })) });
}

export function useCreateUser() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (body: UserInput) => unwrap(client.POST("/api/v1/users/", { body })),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ["users"] }),
  });
}

export function useUpdateUser() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: ({ id, body }: { id: number; body: Schemas["PatchedUserRequest"] }) =>
      unwrap(client.PATCH("/api/v1/users/{id}/", { params: { path: { id } }, body })),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ["users"] }),
  });
}

export function useDeleteUser() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (id: number) => unwrap(client.DELETE("/api/v1/users/{id}/", { params: { path: { id } } })),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ["users"] }),
  });
}

/** A single-use link that lets the user set a new password; the answer is the only copy (shown once). */
export function useIssueResetLink() {
  return useMutation({
    mutationFn: (id: number) => unwrap(client.POST("/api/v1/users/{id}/password-reset/", { params: { path: { id } } })),
  });
}

export function useAudit(query: AuditQuery) {
  return useQuery({ queryKey: ["audit", query], placeholderData: keepPreviousData, refetchInterval: 15_000,
    queryFn: () => unwrap(client.GET("/api/v1/audit/", { params: { query: { page_size: PAGE_SIZE, ...query } } })) });
}
