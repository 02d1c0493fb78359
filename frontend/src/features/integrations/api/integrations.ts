import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { client, unwrap } from "@/shared/api/client";
import type {
  Integration, IntegrationCreated, IntegrationInput, MessageState, RoutingRuleInput,
} from "../types/integrations";

export const DELIVERIES_PAGE_SIZE = 50;
const integrationsKey = ["integrations"] as const;
const rulesKey = ["integration-rules"] as const;
const deliveriesKey = ["deliveries"] as const;

export function useIntegrations() {
  return useQuery({
    queryKey: integrationsKey,
    queryFn: () => unwrap(client.GET("/api/v1/integrations/")),
    refetchInterval: 10_000,
  });
}

export function useConnectorSpecs() {
  return useQuery({
    queryKey: [...integrationsKey, "connectors"],
    queryFn: () => unwrap(client.GET("/api/v1/integrations/connectors/")),
    staleTime: Infinity,
  });
}

export function createIntegration(input: IntegrationInput): Promise<IntegrationCreated> {
  return unwrap(client.POST("/api/v1/integrations/", { body: input }));
}

export function useCreateIntegration() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: createIntegration,
    // The list is refetched, never fed the create response: the inbound token lives only in the mutation's state.
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: integrationsKey }),
  });
}

export function useSetIntegrationEnabled() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: ({ id, enabled }: { id: number; enabled: boolean }): Promise<Integration> =>
      unwrap(client.PATCH("/api/v1/integrations/{id}/", { params: { path: { id } }, body: { enabled } })),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: integrationsKey }),
  });
}

export function useSendTest() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (id: number) => unwrap(client.POST("/api/v1/integrations/{id}/test/", { params: { path: { id } } })),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: deliveriesKey });
      void queryClient.invalidateQueries({ queryKey: integrationsKey });
    },
  });
}

export function useRoutingRules() {
  return useQuery({
    queryKey: rulesKey,
    queryFn: () => unwrap(client.GET("/api/v1/integration-rules/")),
    refetchInterval: 30_000,
  });
}

export function useCreateRule() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (input: RoutingRuleInput) => unwrap(client.POST("/api/v1/integration-rules/", { body: input })),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: rulesKey }),
  });
}

export function useDeleteRule() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (id: number) => unwrap(client.DELETE("/api/v1/integration-rules/{id}/", { params: { path: { id } } })),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: rulesKey }),
  });
}

export interface DeliveryFilters {
  integration?: string;
  state?: string;
  page: number;
}

export function useDeliveries({ integration, state, page }: DeliveryFilters) {
  return useQuery({
    queryKey: [...deliveriesKey, integration ?? "", state ?? "", page],
    queryFn: () => unwrap(client.GET("/api/v1/deliveries/", {
      params: {
        query: {
          page, page_size: DELIVERIES_PAGE_SIZE,
          integration: integration ? Number(integration) : undefined,
          state: state ? [state as MessageState] : undefined,
        },
      },
    })),
    placeholderData: keepPreviousData,
    refetchInterval: 5_000,
  });
}

export function useDelivery(id: number | null) {
  return useQuery({
    queryKey: [...deliveriesKey, "detail", id],
    queryFn: () => unwrap(client.GET("/api/v1/deliveries/{id}/", { params: { path: { id: id as number } } })),
    enabled: id !== null,
    refetchInterval: 5_000,
  });
}

export function useRetryDelivery() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (id: number) => unwrap(client.POST("/api/v1/deliveries/{id}/retry/", { params: { path: { id } } })),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: deliveriesKey }),
  });
}

/** Whose external tickets: one node's (its findings' and incidents'), or one incident's. */
export type TicketsOf = { node: number } | { incident_id: number };

/** External tickets, newest first. */
export function useTickets(of: TicketsOf) {
  return useQuery({
    queryKey: ["tickets", of],
    queryFn: () => unwrap(client.GET("/api/v1/tickets/", { params: { query: { ...of, page_size: 20 } } })),
    refetchInterval: 30_000,
  });
}

export function useAcknowledgeTicket() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: ({ id, note }: { id: number; note: string }) =>
      unwrap(client.POST("/api/v1/tickets/{id}/acknowledge/", { params: { path: { id } }, body: { note } })),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: ["tickets"] });
      void queryClient.invalidateQueries({ queryKey: deliveriesKey });
    },
  });
}
