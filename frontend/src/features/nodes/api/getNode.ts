import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { asList, client, unwrap } from "@/shared/api/client";
import type { GPU, Node } from "@/shared/api/types";

export function getNode(id: number): Promise<Node> {
  return unwrap(client.GET("/api/v1/nodes/{id}/", { params: { path: { id } } }));
}

export function useNode(id: number) {
  return useQuery({ queryKey: ["nodes", id], queryFn: () => getNode(id) });
}

export function getNodeGpus(id: number): Promise<GPU[]> {
  return unwrap(client.GET("/api/v1/gpus/", { params: { query: { node: id, page_size: 100 } } })).then(asList);
}

export function useNodeGpus(id: number) {
  return useQuery({ queryKey: ["nodes", id, "gpus"], queryFn: () => getNodeGpus(id) });
}

/** Operators and admins keep the provider's support contact current (shown with its findings and evidence). */
export function useUpdateSupportContact() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: ({ provider, contact }: { provider: number; contact: string }) =>
      unwrap(client.PATCH("/api/v1/providers/{id}/", { params: { path: { id: provider } }, body: { support_contact: contact } })),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: ["nodes"] });
      void queryClient.invalidateQueries({ queryKey: ["findings"] });
      void queryClient.invalidateQueries({ queryKey: ["providers"] });
    },
  });
}
