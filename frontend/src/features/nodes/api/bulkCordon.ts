import { useMutation, useQueryClient } from "@tanstack/react-query";
import { client, unwrap } from "@/shared/api/client";

/** One operator workflow (cordon) opened on many nodes; refusals come back per node. */
export function useBulkCordon() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: ({ nodes, note }: { nodes: number[]; note: string }) =>
      unwrap(client.POST("/api/v1/incidents/bulk/", { body: { nodes, workflow: "operator-cordon", note } })),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: ["nodes"] });
      void queryClient.invalidateQueries({ queryKey: ["incidents"] });
    },
  });
}
