// Short names for the schema's components. The types themselves come from the OpenAPI schema
// (`npm run gen:api` regenerates schema.d.ts from the server); never hand-copy a payload type.
import type { Schemas } from "./client";

export type { Schemas };
export type Node = Schemas["Node"];
export type GPU = Schemas["GPU"];
export type Provider = Schemas["Provider"];
export type Pool = Schemas["Pool"];
export type Site = Schemas["Site"];
export type BoundaryCell = Schemas["BoundaryCell"];
export type NodeDrift = Schemas["NodeDrift"];
export type DriftItem = Schemas["DriftItem"];
export type SoftwareStack = Schemas["SoftwareStack"];
export type Me = Schemas["Me"];
export type Session = Schemas["Session"];
export type Layer = Schemas["LayerEnum"];
export type Owner = Schemas["OwnerEnum"];
export type DeliveryForm = Schemas["DeliveryFormEnum"];
export type BillingMode = Schemas["BillingModeEnum"];
export type NodeState = Schemas["NodeStateEnum"];
export type Role = Schemas["RoleEnum"];
export type Severity = Schemas["SeverityEnum"];
export type TriageStepName = Schemas["StepEnum"];
