// Integration payloads, from the OpenAPI schema, and the small pure helpers the pages share.
import type { Schemas } from "@/shared/api/types";
import type { Tone } from "@/shared/ui/Badge";

export type Integration = Schemas["Integration"];
export type IntegrationCreated = Schemas["IntegrationCreated"];
export type IntegrationInput = Schemas["IntegrationRequest"];
export type ConnectorSpec = Schemas["ConnectorSpec"];
export type ConfigFieldSpec = Schemas["ConfigFieldSpec"];
export type ConnectorKind = Schemas["ConnectorKindEnum"];
export type RoutingRule = Schemas["RoutingRule"];
export type RoutingRuleInput = Schemas["RoutingRuleRequest"];
export type Delivery = Schemas["Delivery"];
export type DeliveryDetail = Schemas["DeliveryDetail"];
export type DeliveryAttempt = Schemas["DeliveryAttempt"];
export type MessageState = Schemas["MessageStateEnum"];
export type Ticket = Schemas["Ticket"];

export const MESSAGE_STATES: MessageState[] = ["pending", "queued", "sending", "retrying", "delivered", "dead", "cancelled"];

export function messageStateTone(state: MessageState): Tone {
  switch (state) {
    case "delivered":
      return "good";
    case "dead":
      return "bad";
    case "retrying":
      return "warn";
    case "cancelled":
      return "muted";
    default:
      return "info";
  }
}

export function ticketStateTone(state: string): Tone {
  if (state === "resolved") return "good";
  if (state === "acknowledged" || state === "in_progress") return "info";
  return "warn";
}

/** A dead or waiting message can be sent again by an operator. */
export function canRetry(state: MessageState): boolean {
  return state === "dead" || state === "retrying" || state === "pending";
}

/** The routing fields the rule form offers as choices (ids for providers, pools and sites are typed in). */
export const MATCH_CHOICES = {
  event_kinds: ["finding.opened", "finding.resolved", "incident.opened", "incident.step_changed",
    "incident.approval_needed", "incident.closed", "circuit_breaker.tripped", "ticket.requested"],
  responsible_parties: ["provider", "us", "hardware_vendor", "shared"],
  severities: ["critical", "warning", "info"],
} as const;
export type MatchChoiceField = keyof typeof MATCH_CHOICES;

/** "a, b ,c" → ["a", "b", "c"]; blanks dropped. */
export function splitList(text: string): string[] {
  return text.split(",").map((item) => item.trim()).filter(Boolean);
}

/** "1, 2" → [1, 2], or null when something is not a whole number. */
export function parseIds(text: string): number[] | null {
  const items = splitList(text);
  const ids = items.map(Number);
  return ids.every((id) => Number.isInteger(id) && id > 0) ? ids : null;
}

/** A rule's match as "field: a, b; field: c", or null for a rule that matches everything. */
export function matchSummary(match: unknown): string | null {
  if (!match || typeof match !== "object") return null;
  const parts = Object.entries(match as Record<string, unknown>)
    .filter(([, values]) => Array.isArray(values) && values.length > 0)
    .map(([field, values]) => `${field}: ${(values as unknown[]).join(", ")}`);
  return parts.length ? parts.join("; ") : null;
}

/** A config value typed into the form, turned into what the API expects for that field. */
export function configValue(field: ConfigFieldSpec, raw: string | boolean): unknown {
  if (field.type === "BooleanField") return Boolean(raw);
  const text = String(raw).trim();
  if (field.type === "ListField") return splitList(text);
  if (field.type === "IntegerField") return text === "" ? undefined : Number(text);
  return text;
}

/** The config object to send: only the fields the user filled in (the server fills its defaults). */
export function configFrom(fields: ConfigFieldSpec[], values: Record<string, string | boolean>): Record<string, unknown> {
  const config: Record<string, unknown> = {};
  for (const field of fields) {
    const raw = values[field.name];
    if (raw === undefined || raw === "") continue;
    const value = configValue(field, raw);
    if (value === undefined || (Array.isArray(value) && value.length === 0)) continue;
    config[field.name] = value;
  }
  return config;
}
