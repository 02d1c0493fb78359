import { useMutation, useQueryClient } from "@tanstack/react-query";
import { client, unwrap } from "@/shared/api/client";
import type { Schemas, Session } from "@/shared/api/types";
import { SESSION_PATH, getSession, sessionQueryKey } from "@/shared/auth/session";

export type LoginInput = Schemas["LoginRequest"];

export async function login(input: LoginInput): Promise<Session> {
  // GET first so Django has set the csrftoken cookie this POST must echo.
  await getSession();
  return unwrap(client.POST(SESSION_PATH, { body: input }));
}

export function useLogin() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: login,
    onSuccess: (session) => {
      queryClient.clear();
      queryClient.setQueryData(sessionQueryKey, session);
    },
  });
}
