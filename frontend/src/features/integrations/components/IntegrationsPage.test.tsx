import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders, reply, type FakeRequest } from "@/testing/render";
import type { ConnectorSpec, Integration } from "../types/integrations";
import { IntegrationsPage } from "./IntegrationsPage";

const TOKEN = "fit_7b1c0d9e8f7a6b5c4d3e2f1a";

const SPECS: ConnectorSpec[] = [
  {
    kind: "webhook", label: "Generic webhook (CloudEvents)", keeps_tickets: true, signs_inbound: true,
    secrets: { signing_secret: true, inbound_secret: false },
    config: [
      { name: "url", required: true, type: "URLField", default: null, help: "Where to POST the events", choices: [] },
      { name: "include_evidence", required: false, type: "BooleanField", default: true, help: "", choices: [] },
    ],
  },
  {
    kind: "pagerduty", label: "PagerDuty Events API v2", keeps_tickets: true, signs_inbound: true,
    secrets: { routing_key: true, inbound_secret: false },
    config: [{ name: "events_url", required: false, type: "URLField", default: "https://events.pagerduty.com/v2/enqueue", help: "", choices: [] }],
  },
];

function integration(id: number, name: string, extra: Partial<Integration> = {}): Integration {
  return {
    id, name, kind: "webhook", enabled: true, description: "", config: { url: "https://hooks.example" },
    secret_names: ["signing_secret"], max_attempts: null, resolve_hold_s: 600,
    inbound_url: `https://fleet.example/api/v1/inbound/in${id}/`, inbound_token_prefix: "fit_7b1c", sent: 12,
    failed: 3, dead_lettered: 1, backlog: 2, created_at: "2026-12-01T00:00:00Z", updated_at: "2026-12-01T00:00:00Z",
    ...extra,
  };
}

function integrationApi(initial: Integration[] = []) {
  const integrations = [...initial];
  const api = fakeApi({
    "GET /api/v1/integrations/": () => integrations,
    "GET /api/v1/integrations/connectors/": SPECS,
    "GET /api/v1/integration-rules/": [],
    "POST /api/v1/integrations/": (request: FakeRequest) => {
      const body = request.body as { name: string; kind: string; config: { url?: string }; secrets: Record<string, string> };
      if (!body.config.url?.startsWith("https://")) {
        return reply(400, { error: { code: "invalid", message: "Invalid input: config.url", fields: { "config.url": ["Enter a valid URL."] } } });
      }
      const created = integration(10 + integrations.length, body.name, { secret_names: Object.keys(body.secrets) });
      integrations.push(created);
      return reply(201, { ...created, inbound_token: TOKEN });
    },
    "POST /api/v1/integrations/1/test/": () => reply(202, { id: 99, state: "pending" }),
  });
  return { api, integrations };
}

describe("IntegrationsPage", () => {
  it("lists integrations with their counters and lets an operator send a test message, not configure", async () => {
    const { api } = integrationApi([integration(1, "oncall-hook")]);
    const user = userEvent.setup();
    renderWithProviders(<IntegrationsPage />, { role: "operator" });
    const row = within(await screen.findByTestId("integrations")).getByRole("row", { name: /oncall-hook/ });
    expect(row).toHaveTextContent("Generic webhook (CloudEvents)");
    expect(row).toHaveTextContent("signing_secret");
    expect(row).toHaveTextContent("https://fleet.example/api/v1/inbound/in1/");
    await user.click(within(row).getByRole("button", { name: "Send a test message to oncall-hook" }));
    expect(await within(row).findByText("Test message queued: see the delivery log.")).toBeInTheDocument();
    expect(api.calls.some((c) => c.method === "POST" && c.url.pathname === "/api/v1/integrations/1/test/")).toBe(true);
    expect(screen.queryByRole("form", { name: "New integration" })).toBeNull();
    expect(within(row).queryByRole("button", { name: "Disable" })).toBeNull();
  });

  it("shows viewers no write controls", async () => {
    integrationApi([integration(1, "oncall-hook")]);
    renderWithProviders(<IntegrationsPage />, { role: "viewer" });
    await screen.findByTestId("integrations");
    expect(screen.queryByRole("button", { name: /Send a test message/ })).toBeNull();
    expect(screen.queryByRole("form", { name: "Add rule" })).toBeNull();
  });

  it("lets an admin create one: errors beside the field, then the inbound token once and no credentials kept", async () => {
    const { api } = integrationApi();
    const user = userEvent.setup();
    renderWithProviders(<IntegrationsPage />, { role: "admin" });
    const form = await screen.findByRole("form", { name: "New integration" });
    await user.type(within(form).getByLabelText("Name"), "desk");
    await user.type(within(form).getByLabelText(/^url \*/), "http://nope");
    await user.type(within(form).getByLabelText(/^Credential: signing_secret \*/), "s3cret-value");
    await user.click(within(form).getByRole("button", { name: "Create integration" }));
    expect(await within(form).findByText("Enter a valid URL.")).toBeInTheDocument();

    await user.clear(within(form).getByLabelText(/^url \*/));
    await user.type(within(form).getByLabelText(/^url \*/), "https://desk.example/hook");
    await user.click(within(form).getByRole("button", { name: "Create integration" }));
    const created = await screen.findByTestId("created-integration");
    expect(within(created).getByDisplayValue(TOKEN)).toBeInTheDocument();
    const body = api.calls.filter((c) => c.method === "POST").at(-1)!.body;
    expect(body).toEqual({ name: "desk", kind: "webhook", config: { url: "https://desk.example/hook" },
      secrets: { signing_secret: "s3cret-value" } });
    await waitFor(() => expect(within(form).getByLabelText(/^Credential: signing_secret \*/)).toHaveValue(""));

    await user.click(within(created).getByRole("button", { name: "I have copied it" }));
    expect(document.body).not.toHaveTextContent(TOKEN);
  });

  it("switches the form's fields with the connector kind", async () => {
    integrationApi();
    const user = userEvent.setup();
    renderWithProviders(<IntegrationsPage />, { role: "admin" });
    const form = await screen.findByRole("form", { name: "New integration" });
    await user.selectOptions(within(form).getByLabelText("Connector"), "pagerduty");
    expect(within(form).getByLabelText("Credential: routing_key *")).toBeInTheDocument();
    expect(within(form).getByLabelText(/^events_url/)).toHaveAttribute("placeholder", "https://events.pagerduty.com/v2/enqueue");
    expect(within(form).queryByLabelText(/^url \*/)).toBeNull();
  });

  it("adds a routing rule from the chosen fields and shows the server's field errors", async () => {
    const rules: unknown[] = [];
    const api = fakeApi({
      "GET /api/v1/integrations/": [integration(1, "hostco-desk")],
      "GET /api/v1/integrations/connectors/": SPECS,
      "GET /api/v1/integration-rules/": () => rules,
      "POST /api/v1/integration-rules/": (request: FakeRequest) => {
        const body = request.body as { integration: number; match: Record<string, unknown> };
        if ((body.match.providers as number[] | undefined)?.includes(999)) {
          return reply(400, { error: { code: "invalid", message: "Invalid input: match.providers", fields: { "match.providers": ["No such provider: 999."] } } });
        }
        rules.push({ id: 1, integration: 1, integration_name: "hostco-desk", name: "", position: 0, enabled: true, match: body.match,
          created_at: "", updated_at: "" });
        return reply(201, rules[0]);
      },
    });
    const user = userEvent.setup();
    renderWithProviders(<IntegrationsPage />, { role: "operator" });
    const form = await screen.findByRole("form", { name: "Add rule" });
    await user.click(within(form).getByRole("checkbox", { name: "provider" }));
    await user.type(within(form).getByLabelText(/^Provider ids/), "999");
    await user.click(within(form).getByRole("button", { name: "Add rule" }));
    expect(await within(form).findByText("No such provider: 999.")).toBeInTheDocument();

    await user.clear(within(form).getByLabelText(/^Provider ids/));
    await user.type(within(form).getByLabelText(/^Provider ids/), "3");
    await user.click(within(form).getByRole("button", { name: "Add rule" }));
    const table = await screen.findByTestId("routing-rules");
    expect(await within(table).findByText("responsible_parties: provider; providers: 3")).toBeInTheDocument();
    expect(api.calls.filter((c) => c.method === "POST").at(-1)!.body).toEqual(
      { integration: 1, match: { responsible_parties: ["provider"], providers: [3] } });
  });
});
