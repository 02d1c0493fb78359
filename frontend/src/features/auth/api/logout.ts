import { useMutation, useQueryClient } from "@tanstack/react-query";
import { client, unwrap } from "@/shared/api/client";
import { SESSION_PATH, markLoggedOut } from "@/shared/auth/session";

export async function logout(): Promise<void> {
  await unwrap(client.DELETE(SESSION_PATH));
}

export function useLogout() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: logout,
    onSettled: () => {
      queryClient.clear();
      markLoggedOut(queryClient);
    },
  });
}
