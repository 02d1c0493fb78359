// Rule catalog payloads, from the OpenAPI schema.
import type { Schemas } from "@/shared/api/types";

export type Rule = Schemas["Rule"];
export type ParamSpec = Schemas["ParamSpec"];
export type RuleUpdate = Schemas["PatchedRuleRequest"];
export type ParamValue = number | boolean | string[] | null;

export function ruleParams(rule: Rule): Record<string, unknown> {
  return rule.params && typeof rule.params === "object" ? (rule.params as Record<string, unknown>) : {};
}
