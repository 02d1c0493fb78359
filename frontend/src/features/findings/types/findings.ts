// Health-engine payloads, from the OpenAPI schema.
import type { Schemas } from "@/shared/api/types";

export type Finding = Schemas["Finding"];
export type FindingDetail = Schemas["FindingDetail"];
export type Triage = Schemas["Triage"];
export type TriageStepResult = Schemas["TriageStep"];
export type PendingCondition = Schemas["PendingCondition"];

/** The one line that names a finding. */
export function findingTitle(finding: Pick<Finding, "summary" | "rule_title" | "rule">): string {
  return finding.summary || finding.rule_title || finding.rule;
}

export function isActive(finding: Pick<Finding, "state" | "resolved_at">): boolean {
  return finding.state === "open" && !finding.resolved_at;
}
