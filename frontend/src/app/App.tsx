import { QueryClientProvider, type QueryClient } from "@tanstack/react-query";
import { useEffect, useState } from "react";
import { useTranslation } from "react-i18next";
import { BrowserRouter } from "react-router";
import { AppRoutes } from "./AppRoutes";
import { createQueryClient, refetchOnLanguageChange } from "./queryClient";

export function App({ client }: { client?: QueryClient }) {
  const [queryClient] = useState(() => client ?? createQueryClient());
  const { i18n } = useTranslation();
  useEffect(() => refetchOnLanguageChange(queryClient, i18n), [queryClient, i18n]);
  return (
    <QueryClientProvider client={queryClient}>
      <BrowserRouter>
        <AppRoutes />
      </BrowserRouter>
    </QueryClientProvider>
  );
}
