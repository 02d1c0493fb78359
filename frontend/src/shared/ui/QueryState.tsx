// Loading, error, "not available on this server yet" and empty states, the same on every panel.
import type { UseQueryResult } from "@tanstack/react-query";
import type { ReactNode } from "react";
import { useTranslation } from "react-i18next";
import { ApiError } from "@/shared/api/client";

export function Loading({ label }: { label?: string }) {
  const { t } = useTranslation();
  return (
    <div className="state state--loading" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" />
      {label ?? t("state.loading")}
    </div>
  );
}

export function Empty({ children }: { children?: ReactNode }) {
  const { t } = useTranslation();
  return <div className="state state--empty">{children ?? t("state.empty")}</div>;
}

export function NotAvailable({ what }: { what?: string }) {
  const { t } = useTranslation();
  return (
    <div className="state state--unavailable" role="note">
      {t("state.notAvailable", { what: what ?? t("state.thisPanel") })}
    </div>
  );
}

export function ErrorState({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  const { t } = useTranslation();
  const apiError = error instanceof ApiError ? error : null;
  const message = apiError?.message || (error as Error)?.message || t("state.unknownError");
  return (
    <div className="state state--error" role="alert">
      <strong>{apiError?.status === 403 ? t("state.forbidden") : t("state.error")}</strong> {message}
      {onRetry ? (
        <button type="button" className="btn btn--small" onClick={onRetry}>
          {t("action.retry")}
        </button>
      ) : null}
    </div>
  );
}

interface QueryStateProps<T> {
  query: UseQueryResult<T>;
  /** What the panel shows; the endpoint's absence is reported as "not available" with this name. */
  what?: string;
  isEmpty?: (data: T) => boolean;
  empty?: ReactNode;
  children: (data: T) => ReactNode;
}

/** Renders the right state for a query, then the children with its data. */
export function QueryState<T>({ query, what, isEmpty, empty, children }: QueryStateProps<T>) {
  if (query.isPending) return <Loading />;
  if (query.isError && query.data === undefined) {
    if (query.error instanceof ApiError && query.error.isNotAvailable) return <NotAvailable what={what} />;
    if (query.error instanceof ApiError && query.error.isNotFound) return <Empty>{query.error.message}</Empty>;
    return <ErrorState error={query.error} onRetry={() => void query.refetch()} />;
  }
  const data = query.data as T;
  if (isEmpty?.(data)) return <Empty>{empty}</Empty>;
  return <>{children(data)}</>;
}
