// Saved views: a user's named filter sets for a list (nodes, findings), kept on the server per user.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { client, unwrap, type Schemas } from "./client";

export type SavedView = Schemas["SavedView"];
export type SavedViewPage = SavedView["page"];

export function useSavedViews(page: SavedViewPage) {
  return useQuery({
    queryKey: ["saved-views", page],
    queryFn: () => unwrap(client.GET("/api/v1/saved-views/", { params: { query: { page } } })),
    staleTime: 30_000,
  });
}

export function useSaveView(page: SavedViewPage) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: ({ name, query }: { name: string; query: string }) =>
      unwrap(client.POST("/api/v1/saved-views/", { body: { page, name, query } })),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ["saved-views", page] }),
  });
}

export function useDeleteView(page: SavedViewPage) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (id: number) => unwrap(client.DELETE("/api/v1/saved-views/{id}/", { params: { path: { id } } })),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ["saved-views", page] }),
  });
}
