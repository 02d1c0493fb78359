import { describe, expect, it } from "vitest";
import { expiryInDays, expiryOnDate, tokenStatus } from "./tokens";

describe("API token helpers", () => {
  const now = new Date(2026, 11, 3, 12, 0, 0).getTime();

  it("puts the expiry a whole number of days ahead", () => {
    expect(Date.parse(expiryInDays(90, now)) - now).toBe(90 * 86_400_000);
  });

  it("ends a picked day at its last second and refuses today or the past", () => {
    expect(new Date(expiryOnDate("2026-12-04", now)!).getTime()).toBe(new Date(2026, 11, 4, 23, 59, 59).getTime());
    expect(expiryOnDate("2026-12-03", now)).not.toBeNull(); // later today is still ahead
    expect(expiryOnDate("2026-12-02", now)).toBeNull();
    expect(expiryOnDate("", now)).toBeNull();
    expect(expiryOnDate("next week", now)).toBeNull();
  });

  it("tells revoked from expired from active", () => {
    expect(tokenStatus({ revoked_at: "2026-01-01T00:00:00Z", is_active: false })).toBe("revoked");
    expect(tokenStatus({ revoked_at: null, is_active: false })).toBe("expired");
    expect(tokenStatus({ revoked_at: null, is_active: true })).toBe("active");
  });
});
