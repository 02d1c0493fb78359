// The product's vocabulary (docs/concepts.md), in the order the console shows it.
import type { BillingMode, DeliveryForm, Layer, NodeState, Owner, Role, Severity, TriageStepName } from "@/shared/api/types";

/** Responsibility layers, top (application) to bottom (facility): the boundary matrix's rows. */
export const LAYERS_TOP_DOWN: Layer[] = [
  "application", "framework", "cuda_runtime", "gpu_driver", "host_os", "virtualization", "hardware", "facility",
];

/** Who can own a layer: the boundary matrix's columns (not_applicable is drawn as a greyed row). */
export const OWNERS: Owner[] = ["us", "provider", "hardware_vendor", "shared"];

export const DELIVERY_FORMS: DeliveryForm[] = ["cloud_shared", "cloud_dedicated", "bare_metal_hosted", "bare_metal_owned"];
export const BILLING_MODES: BillingMode[] = ["on_demand", "reserved", "spot"];
export const NODE_STATES: NodeState[] = ["enrolling", "active", "cordoned", "draining", "preempted", "replacing", "retired"];

/** The fixed triage order: every finding is placed in one step. */
export const TRIAGE_STEPS: TriageStepName[] = ["visibility", "software_chain", "capacity", "platform_hardware"];

/** Most urgent first. */
export const SEVERITIES: Severity[] = ["critical", "warning", "info"];

export const FINDING_STATES = ["open", "resolved"] as const;

const ROLE_RANK: Record<Role, number> = { viewer: 0, operator: 1, admin: 2 };

export function hasRole(user: { role: Role; is_superuser?: boolean } | null | undefined, needed: Role): boolean {
  if (!user) return false;
  if (user.is_superuser) return true;
  return (ROLE_RANK[user.role] ?? -1) >= ROLE_RANK[needed];
}

export function severityRank(severity: string | undefined | null): number {
  const index = SEVERITIES.indexOf(severity as Severity);
  return index === -1 ? SEVERITIES.length : index;
}
