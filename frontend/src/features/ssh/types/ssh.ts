// SSH hosts, keys and bootstrap runs, from the OpenAPI schema.
import type { Schemas } from "@/shared/api/types";
import type { Tone } from "@/shared/ui/Badge";

export type SSHHost = Schemas["SSHHost"];
export type SSHHostInput = Schemas["SSHHostRequest"];
export type SSHKey = Schemas["SSHKey"];
export type BootstrapRun = Schemas["BootstrapRun"];
export type BootstrapHost = Schemas["BootstrapHost"];
export type BootstrapInput = Schemas["BootstrapCreateRequest"];
export type HostKeyState = Schemas["HostKeyStateEnum"];
export type BootstrapState = Schemas["BootstrapHostStateEnum"];

export const HOST_KEY_TONE: Record<HostKeyState, Tone> = { unknown: "muted", pending: "warn", trusted: "good", changed: "bad" };
export const BOOTSTRAP_TONE: Record<BootstrapState, Tone> = {
  queued: "muted", connecting: "info", checking: "info", installing: "info", done: "good", up_to_date: "good",
  failed: "bad",
};
export const FINISHED: ReadonlySet<BootstrapState> = new Set(["done", "up_to_date", "failed"]);
/** What a bootstrap may let the agent run on request (install.sh --allow-actions). */
export const ALLOWABLE_ACTIONS = ["collect_evidence", "verify", "dcgm_diag", "gpu_reset", "reboot", "run_hook"] as const;

/** How far a run is: hosts finished of all, and whether any is still in flight. */
export function bootstrapProgress(run: Pick<BootstrapRun, "hosts">): { finished: number; total: number; failed: number; running: boolean } {
  const total = run.hosts.length;
  const finished = run.hosts.filter((row) => FINISHED.has(row.state)).length;
  const failed = run.hosts.filter((row) => row.state === "failed").length;
  return { finished, total, failed, running: finished < total };
}

/** A host needs an operator when it offered a key nobody confirmed yet, or a key other than the pinned one. */
export function needsConfirmation(host: Pick<SSHHost, "host_key_state" | "offered_fingerprint">): boolean {
  return (host.host_key_state === "pending" || host.host_key_state === "changed") && Boolean(host.offered_fingerprint);
}
