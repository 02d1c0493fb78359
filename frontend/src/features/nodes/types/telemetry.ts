// Telemetry payloads, from the OpenAPI schema.
import type { Schemas } from "@/shared/api/types";

export type NodeLiveStatus = Schemas["NodeStatus"];
export type NodeEvent = Schemas["Event"];
export type ChangeLogEntry = Schemas["ChangeLogEntry"];
export type Series = Schemas["Series"];

/** One entry of NodeStatus.gpus: the latest reading of one GPU. */
export type GpuLiveStatus = Schemas["GPUStatus"];
