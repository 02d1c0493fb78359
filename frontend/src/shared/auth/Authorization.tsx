// Role gates. A viewer sees no write controls at all (not disabled ones): wrap every write control in <Can>.
import type { ReactNode } from "react";
import type { Role } from "@/shared/api/types";
import { hasRole } from "@/shared/lib/domain";
import { useCurrentUser } from "./session";

export function useHasRole(role: Role): boolean {
  return hasRole(useCurrentUser(), role);
}

export function Can({ role = "operator", children, fallback = null }: { role?: Role; children: ReactNode; fallback?: ReactNode }) {
  return <>{useHasRole(role) ? children : fallback}</>;
}
