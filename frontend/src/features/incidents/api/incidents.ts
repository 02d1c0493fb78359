import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { asList, client, unwrap, type Page, type QueryOf } from "@/shared/api/client";
import type { Incident, IncidentDetail, PoolOverview, StepAction, TimelineEntry } from "../types/incidents";

export type IncidentListParams = QueryOf<"/api/v1/incidents/">;

export function getIncidents(params: IncidentListParams): Promise<Page<Incident>> {
  return unwrap(client.GET("/api/v1/incidents/", { params: { query: params } }));
}

export function useIncidents(params: IncidentListParams) {
  return useQuery({ queryKey: ["incidents", params], queryFn: () => getIncidents(params), placeholderData: keepPreviousData });
}

export function useIncident(id: number) {
  return useQuery({
    queryKey: ["incident", id],
    queryFn: () => unwrap(client.GET("/api/v1/incidents/{id}/", { params: { path: { id } } })),
    enabled: Number.isInteger(id) && id > 0,
  });
}

export function useIncidentTimeline(id: number) {
  return useQuery({
    queryKey: ["incident", id, "timeline"],
    queryFn: (): Promise<TimelineEntry[]> => unwrap(client.GET("/api/v1/incidents/{id}/timeline/", { params: { path: { id } } })).then(asList),
    enabled: Number.isInteger(id) && id > 0,
  });
}

export function useNodeIncidents(nodeId: number) {
  return useQuery({
    queryKey: ["incidents", "node", nodeId],
    queryFn: (): Promise<Incident[]> => unwrap(client.GET("/api/v1/nodes/{node_id}/incidents/", { params: { path: { node_id: nodeId } } })).then(asList),
    refetchInterval: 10_000,
  });
}

export function usePoolRemediation() {
  return useQuery({
    queryKey: ["pool-remediation", "overview"],
    queryFn: (): Promise<PoolOverview[]> => unwrap(client.GET("/api/v1/pool-remediation/overview/")).then(asList),
    refetchInterval: 15_000,
  });
}

function useInvalidateIncidents() {
  const queryClient = useQueryClient();
  return () => {
    void queryClient.invalidateQueries({ queryKey: ["incidents"] });
    void queryClient.invalidateQueries({ queryKey: ["incident"] });
    void queryClient.invalidateQueries({ queryKey: ["pool-remediation"] });
  };
}

export interface StepActionInput {
  id: number;
  action: StepAction;
  stepIndex: number;
  note: string;
}

const STEP_PATHS = {
  approve: "/api/v1/incidents/{id}/approve/",
  complete: "/api/v1/incidents/{id}/complete/",
  fail: "/api/v1/incidents/{id}/fail/",
  retry: "/api/v1/incidents/{id}/retry/",
  skip: "/api/v1/incidents/{id}/skip/",
} as const;

/** Approve, complete, fail, retry or skip the current step; the server refuses any other step (409). */
export function useStepAction() {
  const queryClient = useQueryClient();
  const invalidate = useInvalidateIncidents();
  return useMutation({
    mutationFn: ({ id, action, stepIndex, note }: StepActionInput): Promise<IncidentDetail> =>
      unwrap(client.POST(STEP_PATHS[action], { params: { path: { id } }, body: { step_index: stepIndex, note } })),
    onSuccess: (incident) => {
      queryClient.setQueryData(["incident", incident.id], incident);
      invalidate();
    },
  });
}

export function useEscalate() {
  const invalidate = useInvalidateIncidents();
  return useMutation({
    mutationFn: ({ id, workflow, note }: { id: number; workflow: string; note: string }): Promise<IncidentDetail> =>
      unwrap(client.POST("/api/v1/incidents/{id}/escalate/", { params: { path: { id } }, body: { workflow, note } })),
    onSuccess: invalidate,
  });
}

export function useCancelIncident() {
  const invalidate = useInvalidateIncidents();
  return useMutation({
    mutationFn: ({ id, note }: { id: number; note: string }): Promise<IncidentDetail> =>
      unwrap(client.POST("/api/v1/incidents/{id}/cancel/", { params: { path: { id } }, body: { note } })),
    onSuccess: invalidate,
  });
}

/** The node page's cordon / drain / reboot / replace: an incident with that operator workflow. */
export function useOpenIncident() {
  const invalidate = useInvalidateIncidents();
  return useMutation({
    mutationFn: ({ node, workflow, note }: { node: number; workflow: string; note: string }): Promise<IncidentDetail> =>
      unwrap(client.POST("/api/v1/incidents/", { body: { node, workflow, note } })),
    onSuccess: invalidate,
  });
}

export function useWorkflows() {
  return useQuery({
    queryKey: ["workflows"],
    queryFn: () => unwrap(client.GET("/api/v1/workflows/", { params: { query: { enabled: true } } })).then(asList),
    staleTime: 60_000,
  });
}

export type OverrideInput = { kind: "acknowledge" | "snooze" | "mark_healthy"; finding: number; reason: string; until?: string };

export function useCreateOverride() {
  const invalidate = useInvalidateIncidents();
  return useMutation({
    mutationFn: (input: OverrideInput) => unwrap(client.POST("/api/v1/overrides/", { body: input })),
    onSuccess: invalidate,
  });
}

export function useResetBreaker() {
  const invalidate = useInvalidateIncidents();
  return useMutation({
    mutationFn: ({ id, note }: { id: number; note: string }) =>
      unwrap(client.POST("/api/v1/circuit-breakers/{id}/reset/", { params: { path: { id } }, body: { note } })),
    onSuccess: invalidate,
  });
}
