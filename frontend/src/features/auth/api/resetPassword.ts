import { useMutation } from "@tanstack/react-query";
import { client, unwrap } from "@/shared/api/client";
import type { Schemas } from "@/shared/api/types";
import { getSession } from "@/shared/auth/session";

export type ResetInput = Schemas["PasswordResetConfirmRequest"];

/** The link's uid and token, from the URL fragment (`#uid=…&token=…`; a fragment never reaches the server's logs). */
export function resetLinkParams(hash: string): { uid: string; token: string } | null {
  const params = new URLSearchParams(hash.replace(/^#/, ""));
  const uid = params.get("uid");
  const token = params.get("token");
  return uid && token ? { uid, token } : null;
}

export function useResetPassword() {
  return useMutation({
    mutationFn: async (body: ResetInput) => {
      await getSession();  // sets the csrftoken cookie this POST must echo, as before a login
      return unwrap(client.POST("/api/v1/auth/password-reset/", { body }));
    },
  });
}
