// Telemetry payloads, from the OpenAPI schema.
import type { Schemas } from "@/shared/api/types";

export type NodeLiveStatus = Schemas["NodeStatus"];
export type NodeEvent = Schemas["Event"];
export type ChangeLogEntry = Schemas["ChangeLogEntry"];
export type Series = Schemas["Series"];

/** One entry of NodeStatus.gpus. The schema leaves these untyped (a SerializerMethodField on the server);
 * the fields follow fleet/telemetry/api/serializers.py GPUStatusSerializer. */
export interface GpuLiveStatus {
  gpu?: number;
  index?: number;
  uuid?: string;
  model?: string;
  lost?: boolean;
  collected_at?: string;
  utilization_gpu_pct?: number | null;
  utilization_memory_pct?: number | null;
  memory_used_bytes?: number | null;
  memory_total_bytes?: number | null;
  temperature_c?: number | null;
  power_draw_w?: number | null;
  power_limit_w?: number | null;
  sm_clock_mhz?: number | null;
  clock_event_reasons?: string[];
  ecc_volatile_uncorrected?: number | null;
  ecc_aggregate_uncorrected?: number | null;
  retired_pages_pending?: boolean | null;
  remapped_rows_pending?: boolean | null;
  remapped_rows_failure?: boolean | null;
  pcie_gen_current?: number | null;
  pcie_gen_max?: number | null;
  pcie_width_current?: number | null;
  pcie_width_max?: number | null;
  process_count?: number;
  process_memory_bytes?: number;
}
