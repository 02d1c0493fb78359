// API-token payloads, from the OpenAPI schema.
import type { Schemas } from "@/shared/api/types";

export type ApiToken = Schemas["APIToken"];
/** The create response: the only time the key itself is sent. */
export type ApiTokenCreated = Schemas["APITokenCreated"];
export type ApiTokenInput = Schemas["APITokenRequest"];

export type TokenStatus = "active" | "expired" | "revoked";

export function tokenStatus(token: Pick<ApiToken, "revoked_at" | "is_active">): TokenStatus {
  if (token.revoked_at) return "revoked";
  return token.is_active ? "active" : "expired";
}

/** The expiry choices, in days. The console always sends an expiry; a longer-lived token is a deliberate,
 * visible choice (up to a year, or a picked date). */
export const EXPIRY_DAYS = [7, 30, 90, 180, 365] as const;
export const DEFAULT_EXPIRY_DAYS = 90;

/** `days` from `now`, as the ISO time the API takes. */
export function expiryInDays(days: number, now: number = Date.now()): string {
  return new Date(now + days * 86_400_000).toISOString();
}

/** The end of a picked calendar day (`YYYY-MM-DD`, local time), or null when that moment has passed. */
export function expiryOnDate(day: string, now: number = Date.now()): string | null {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(day);
  if (!match) return null;
  const end = new Date(Number(match[1]), Number(match[2]) - 1, Number(match[3]), 23, 59, 59);
  return end.getTime() > now ? end.toISOString() : null;
}
