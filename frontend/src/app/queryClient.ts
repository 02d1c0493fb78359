import { QueryCache, QueryClient, type Query } from "@tanstack/react-query";
import { ApiError } from "@/shared/api/client";

export const REFRESH_MS = 5_000;

/** Poll every few seconds, but stop polling an endpoint this server does not have (404) or forbids (403). */
export function refreshInterval(query: Query): number | false {
  const error = query.state.error;
  if (error instanceof ApiError && (error.isNotAvailable || error.status === 403 || error.status === 401)) return false;
  return REFRESH_MS;
}

export function createQueryClient(): QueryClient {
  return new QueryClient({
    queryCache: new QueryCache(),
    defaultOptions: {
      queries: {
        refetchInterval: refreshInterval,
        refetchIntervalInBackground: false,
        refetchOnWindowFocus: true,
        staleTime: 2_000,
        retry: (failures, error) => {
          if (error instanceof ApiError && error.status >= 400 && error.status < 500) return false;
          return failures < 2;
        },
      },
      mutations: { retry: false },
    },
  });
}
