import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { asList, client, unwrap } from "@/shared/api/client";
import type { BootstrapInput, BootstrapRun, SSHHost, SSHHostInput, SSHKey } from "../types/ssh";

const hostsKey = ["ssh-hosts"] as const;
const runsKey = ["ssh-bootstraps"] as const;

export function getHosts(): Promise<SSHHost[]> {
  return unwrap(client.GET("/api/v1/ssh-hosts/", { params: { query: { page_size: 500 } } })).then(asList);
}

export function useHosts() {
  return useQuery({ queryKey: hostsKey, queryFn: getHosts, refetchInterval: 15_000 });
}

export function getKeys(): Promise<SSHKey[]> {
  return unwrap(client.GET("/api/v1/ssh-keys/", { params: { query: { page_size: 500 } } })).then(asList);
}

export function useKeys() {
  return useQuery({ queryKey: ["ssh-keys"], queryFn: getKeys, staleTime: 60_000 });
}

function useHostMutation<T>(mutationFn: (input: T) => Promise<SSHHost>) {
  const queryClient = useQueryClient();
  return useMutation({ mutationFn, onSuccess: () => void queryClient.invalidateQueries({ queryKey: hostsKey }) });
}

export function useCreateHost() {
  return useHostMutation((input: SSHHostInput) => unwrap(client.POST("/api/v1/ssh-hosts/", { body: input })));
}

export function useScanHost() {
  return useHostMutation((id: number) => unwrap(client.POST("/api/v1/ssh-hosts/{id}/scan/", { params: { path: { id } } })));
}

/** Pins the key the host offered; the fingerprint sent is the one the operator was shown, so a key that changed
 * in between is refused by the server instead of trusted. */
export function useConfirmHostKey() {
  return useHostMutation(({ id, fingerprint }: { id: number; fingerprint: string }) =>
    unwrap(client.POST("/api/v1/ssh-hosts/{id}/confirm-host-key/", { params: { path: { id } }, body: { fingerprint } })));
}

export function getRuns(): Promise<BootstrapRun[]> {
  return unwrap(client.GET("/api/v1/ssh-bootstraps/", { params: { query: { page_size: 20 } } })).then(asList);
}

export function useRuns() {
  return useQuery({ queryKey: runsKey, queryFn: getRuns, refetchInterval: 15_000 });
}

/** One run, polled every two seconds while any of its hosts is still in flight. */
export function useRun(id: number | null) {
  return useQuery({
    queryKey: [...runsKey, id],
    enabled: id !== null,
    queryFn: () => unwrap(client.GET("/api/v1/ssh-bootstraps/{id}/", { params: { path: { id: id as number } } })),
    refetchInterval: (query) => (query.state.data && query.state.data.state === "finished" ? false : 2_000),
  });
}

export function useStartBootstrap() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (input: BootstrapInput) => unwrap(client.POST("/api/v1/ssh-bootstraps/", { body: input })),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: runsKey }),
  });
}
