import { useMutation, useQueryClient } from "@tanstack/react-query";
import { api } from "@/shared/api/client";
import { SESSION_PATH, markLoggedOut } from "@/shared/auth/session";

export function logout(): Promise<void> {
  return api.delete(SESSION_PATH);
}

export function useLogout() {
  const client = useQueryClient();
  return useMutation({
    mutationFn: logout,
    onSettled: () => {
      client.clear();
      markLoggedOut(client);
    },
  });
}
