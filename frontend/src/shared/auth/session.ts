// The console's session: who is logged in and with which role. Shared because every feature gates on it.
import { useQuery, type QueryClient } from "@tanstack/react-query";
import { client, unwrap } from "@/shared/api/client";
import type { Me, Session } from "@/shared/api/types";

export const SESSION_PATH = "/api/v1/auth/session/";
export const sessionQueryKey = ["auth", "session"] as const;

export function getSession(): Promise<Session> {
  return unwrap(client.GET(SESSION_PATH));
}

export function useSession() {
  return useQuery({
    queryKey: sessionQueryKey,
    queryFn: getSession,
    refetchInterval: 60_000,
    staleTime: 30_000,
    retry: 1,
  });
}

/** The logged-in user, or null while loading or when logged out. */
export function useCurrentUser(): Me | null {
  const { data } = useSession();
  return data?.authenticated ? (data.user ?? null) : null;
}

export function markLoggedOut(queryClient: QueryClient): void {
  queryClient.setQueryData<Session>(sessionQueryKey, { authenticated: false, user: null });
}
