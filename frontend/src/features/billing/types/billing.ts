// Billing payloads, from the OpenAPI schema.
import type { Schemas } from "@/shared/api/types";

export type NodeBilling = Schemas["NodeBilling"];
export type NodeCost = Schemas["NodeCost"];
export type Preemption = Schemas["PreemptionRecord"];
export type CostReport = Schemas["CostReport"];
