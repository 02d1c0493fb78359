import { useMutation, useQueryClient } from "@tanstack/react-query";
import { client, unwrap } from "@/shared/api/client";

/** Acknowledge or snooze many findings with one reason: all or none. */
export function useBulkOverride() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: ({ findings, kind, reason, until }: { findings: number[]; kind: "acknowledge" | "snooze"; reason: string; until?: string }) =>
      unwrap(client.POST("/api/v1/overrides/bulk/", { body: { findings, kind, reason, until: until ?? null } })),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ["findings"] }),
  });
}
