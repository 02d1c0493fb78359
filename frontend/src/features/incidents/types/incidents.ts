// Remediation payloads, from the OpenAPI schema.
import type { Schemas } from "@/shared/api/types";

export type Incident = Schemas["Incident"];
export type IncidentDetail = Schemas["IncidentDetail"];
export type PlanStep = Schemas["PlanStep"];
export type StepRun = Schemas["StepRun"];
export type TimelineEntry = Schemas["TimelineEntry"];
export type PoolOverview = Schemas["PoolOverview"];
export type IncidentState = Schemas["IncidentStateEnum"];

export const OPEN_STATES: IncidentState[] = ["queued", "running", "waiting", "awaiting_approval", "needs_attention", "paused"];

/** The Incidents page's four queues. */
export type IncidentGroup = "queue" | "inFlight" | "approval" | "provider";
export const INCIDENT_GROUPS: IncidentGroup[] = ["queue", "inFlight", "approval", "provider"];

export function incidentGroup(incident: Pick<Incident, "state" | "waiting_on">): IncidentGroup | null {
  if (incident.state === "queued") return "queue";
  if (incident.state === "awaiting_approval") return "approval";
  if (incident.state === "waiting" && (incident.waiting_on === "provider" || incident.waiting_on === "vendor")) return "provider";
  return OPEN_STATES.includes(incident.state) ? "inFlight" : null;
}

/** What an operator may do to the current step, by its status. */
export type StepAction = "approve" | "complete" | "fail" | "retry" | "skip";

export function stepActions(step: Pick<PlanStep, "status">, waitingOn: string): StepAction[] {
  switch (step.status) {
    case "awaiting_approval":
      return ["approve", "skip"];
    // A step waiting only for the control plane's own checks cannot be marked done again.
    case "waiting":
      return waitingOn === "verification" || waitingOn === "replacement" ? ["retry", "skip"] : ["complete", "fail", "retry", "skip"];
    case "failed":
    case "cancelled":
      return ["retry", "skip"];
    case "pending":
    case "running":
      return ["skip"];
    default:
      return [];
  }
}

/** The node page's buttons: each opens an incident with the operator workflow of that name. */
export const NODE_ACTIONS = [
  { action: "cordon", workflow: "operator-cordon" },
  { action: "drain", workflow: "operator-drain" },
  { action: "reboot", workflow: "operator-reboot" },
  { action: "replace", workflow: "operator-replace" },
] as const;
