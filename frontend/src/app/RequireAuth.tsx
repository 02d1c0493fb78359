import { useEffect, type ReactNode } from "react";
import { useQueryClient } from "@tanstack/react-query";
import { useTranslation } from "react-i18next";
import { Navigate, useLocation } from "react-router";
import { onUnauthorized } from "@/shared/api/client";
import { markLoggedOut, useSession } from "@/shared/auth/session";
import { ErrorState, Loading } from "@/shared/ui/QueryState";

export function RequireAuth({ children }: { children: ReactNode }) {
  const { t } = useTranslation();
  const session = useSession();
  const location = useLocation();
  const client = useQueryClient();

  useEffect(() => onUnauthorized(() => markLoggedOut(client)), [client]);

  if (session.isPending) return <main className="page"><Loading label={t("state.checkingSession")} /></main>;
  if (session.isError && !session.data) {
    return <main className="page"><ErrorState error={session.error} onRetry={() => void session.refetch()} /></main>;
  }
  if (!session.data?.authenticated) {
    const next = `${location.pathname}${location.search}`;
    return <Navigate to={`/login?next=${encodeURIComponent(next)}`} replace />;
  }
  return <>{children}</>;
}
