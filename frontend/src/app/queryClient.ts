import { QueryCache, QueryClient, type Query } from "@tanstack/react-query";
import type { i18n as I18n } from "i18next";
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

/** Server-written texts (finding summaries, actions, triage headlines, the rule catalogue) come in the language
 * the request asked for: after a language switch every cached answer is stale and the shown ones refetch. */
export function refetchOnLanguageChange(queryClient: QueryClient, i18n: I18n): () => void {
  const refetch = () => void queryClient.invalidateQueries();
  i18n.on("languageChanged", refetch);
  return () => i18n.off("languageChanged", refetch);
}
