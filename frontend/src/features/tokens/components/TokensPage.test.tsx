import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders, reply, type FakeRequest } from "@/testing/render";
import type { ApiToken } from "../types/tokens";
import { TokensPage } from "./TokensPage";

const DAY_MS = 86_400_000;
const KEY = "fleet_4f9c1d2e8a7b6c5d4e3f2a1b0c9d8e7f";

function token(id: number, name: string, extra: Partial<ApiToken> = {}): ApiToken {
  return {
    id, name, user: "viewer-user", prefix: `fleet_${id}abc`, write_enabled: false,
    expires_at: "2027-03-01T00:00:00Z", revoked_at: null, last_used_at: null, created_at: "2026-12-01T00:00:00Z",
    is_active: true, ...extra,
  };
}

/** A token API with state: what was created is listed (without its key), what was revoked says so. */
function tokenApi(initial: ApiToken[] = []) {
  const tokens = [...initial];
  const api = fakeApi({
    "GET /api/v1/tokens/": () => ({ count: tokens.length, results: tokens }),
    "POST /api/v1/tokens/": (request: FakeRequest) => {
      const body = request.body as { name: string; write_enabled: boolean; expires_at: string | null };
      if (!body.name) return reply(400, { error: { code: "invalid", message: "Invalid input.", fields: { name: ["This field is required."] } } });
      const created = token(100 + tokens.length, body.name, { write_enabled: body.write_enabled, expires_at: body.expires_at });
      tokens.unshift(created);
      return reply(201, { ...created, key: KEY });
    },
  });
  return { api, tokens };
}

const posts = (api: ReturnType<typeof fakeApi>) => api.calls.filter((c) => c.method === "POST");

describe("TokensPage", () => {
  it("creates a read-only token expiring in 90 days by default and shows its key once", async () => {
    const { api } = tokenApi();
    const user = userEvent.setup();
    renderWithProviders(<TokensPage />, { role: "viewer" });
    expect(await screen.findByText("No API tokens yet.")).toBeInTheDocument();
    expect(screen.getByRole("checkbox", { name: "Allow writes" })).not.toBeChecked();
    expect(screen.getByLabelText("Expires in")).toHaveDisplayValue("90 days");

    await user.type(screen.getByLabelText("Name"), "grafana");
    const before = Date.now();
    await user.click(screen.getByRole("button", { name: "Create token" }));

    const shown = await screen.findByTestId("created-api-token");
    expect(within(shown).getByDisplayValue(KEY)).toBeInTheDocument();
    expect(shown).toHaveTextContent("you will not see it again");
    expect(within(shown).getByRole("button", { name: "Copy key" })).toBeInTheDocument();

    const [create] = posts(api);
    const body = create.body as { name: string; write_enabled: boolean; expires_at: string };
    expect(body).toMatchObject({ name: "grafana", write_enabled: false });
    const expires = Date.parse(body.expires_at);
    expect(expires).toBeGreaterThanOrEqual(before + 90 * DAY_MS);
    expect(expires).toBeLessThanOrEqual(Date.now() + 90 * DAY_MS);

    // The list is refetched from the server (which never sends the key again) and shows the new token.
    const table = await screen.findByTestId("api-tokens");
    const row = within(table).getByRole("row", { name: /grafana/ });
    expect(row).toHaveTextContent("read-only");
    expect(row).toHaveTextContent("never used");
    expect(table).not.toHaveTextContent(KEY);

    await user.click(within(shown).getByRole("button", { name: "I have copied it" }));
    expect(screen.queryByTestId("created-api-token")).toBeNull();
    expect(document.body).not.toHaveTextContent(KEY);
    expect(screen.queryByDisplayValue(KEY)).toBeNull();
  });

  it("grants write access and a longer expiry only when asked, then starts from the safe defaults again", async () => {
    const { api } = tokenApi();
    const user = userEvent.setup();
    renderWithProviders(<TokensPage />, { role: "operator" });
    await screen.findByText("No API tokens yet.");
    expect(screen.getByText(/anything your role \(operator\) can/)).toBeInTheDocument();

    await user.type(screen.getByLabelText("Name"), "ci deploys");
    await user.selectOptions(screen.getByLabelText("Expires in"), "30 days");
    await user.click(screen.getByRole("checkbox", { name: "Allow writes" }));
    const before = Date.now();
    await user.click(screen.getByRole("button", { name: "Create token" }));
    await screen.findByTestId("created-api-token");

    const body = posts(api)[0].body as { write_enabled: boolean; expires_at: string };
    expect(body.write_enabled).toBe(true);
    expect(Date.parse(body.expires_at)).toBeGreaterThanOrEqual(before + 30 * DAY_MS);
    expect(Date.parse(body.expires_at)).toBeLessThan(before + 31 * DAY_MS);
    expect(await screen.findByRole("row", { name: /ci deploys/ })).toHaveTextContent("read & write");
    expect(screen.getByRole("checkbox", { name: "Allow writes" })).not.toBeChecked();
    expect(screen.getByLabelText("Name")).toHaveValue("");
  });

  it("refuses an expiry date that is not in the future without asking the server", async () => {
    const { api } = tokenApi();
    const user = userEvent.setup();
    renderWithProviders(<TokensPage />, { role: "viewer" });
    await screen.findByText("No API tokens yet.");
    await user.type(screen.getByLabelText("Name"), "old");
    await user.selectOptions(screen.getByLabelText("Expires in"), "On a date…");
    await user.type(screen.getByLabelText("Expiry date"), "2001-01-01");
    // The browser's own check (the picker's minimum) stops the submit first...
    expect(screen.getByLabelText("Expiry date")).toBeInvalid();
    await user.click(screen.getByRole("button", { name: "Create token" }));
    // ...and where it does not run, the form's own check does.
    fireEvent.submit(screen.getByRole("form", { name: "New API token" }));
    expect(await screen.findByRole("alert")).toHaveTextContent("Pick today or a later day.");
    expect(posts(api)).toHaveLength(0);
  });

  it("shows the API's field errors beside the field", async () => {
    fakeApi({
      "GET /api/v1/tokens/": { count: 0, results: [] },
      "POST /api/v1/tokens/": reply(400, { error: { code: "invalid", message: "Invalid input.", fields: { expires_at: ["At most 365 days."] } } }),
    });
    const user = userEvent.setup();
    renderWithProviders(<TokensPage />, { role: "viewer" });
    await user.type(screen.getByLabelText("Name"), "x");
    await user.click(screen.getByRole("button", { name: "Create token" }));
    expect(await screen.findByRole("alert")).toHaveTextContent("At most 365 days.");
    expect(screen.queryByTestId("created-api-token")).toBeNull();
  });

  it("revokes a token only after confirmation", async () => {
    document.cookie = "csrftoken=tokens-csrf";
    const tokens = [token(5, "grafana", { last_used_at: new Date(Date.now() - 120_000).toISOString() })];
    const api = fakeApi({
      "GET /api/v1/tokens/": () => ({ count: tokens.length, results: tokens }),
      "POST /api/v1/tokens/5/revoke/": () => {
        tokens[0] = { ...tokens[0], revoked_at: "2026-12-03T00:00:00Z", is_active: false };
        return tokens[0];
      },
    });
    const user = userEvent.setup();
    renderWithProviders(<TokensPage />, { role: "viewer" });
    const row = await screen.findByRole("row", { name: /grafana/ });
    expect(row).toHaveTextContent("2 minutes ago");
    expect(row).toHaveTextContent("active");

    await user.click(within(row).getByRole("button", { name: "Revoke token grafana" }));
    expect(within(row).getByText(/stops working at once/)).toBeInTheDocument();
    await user.click(within(row).getByRole("button", { name: "Cancel" }));
    expect(posts(api)).toHaveLength(0);

    await user.click(within(row).getByRole("button", { name: "Revoke token grafana" }));
    await user.click(within(row).getByRole("button", { name: "Yes, revoke" }));
    await waitFor(() => expect(posts(api)).toHaveLength(1));
    expect(posts(api)[0].url.pathname).toBe("/api/v1/tokens/5/revoke/");
    expect(posts(api)[0].headers["x-csrftoken"]).toBe("tokens-csrf");
    await waitFor(() => expect(screen.getByRole("row", { name: /grafana/ })).toHaveTextContent("revoked"));
    expect(within(screen.getByRole("row", { name: /grafana/ })).queryByRole("button")).toBeNull();
  });

  it("says whose each token is when an admin sees everyone's", async () => {
    tokenApi([token(1, "mine", { user: "admin-user" }), token(2, "theirs", { user: "alice", expires_at: null })]);
    renderWithProviders(<TokensPage />, { role: "admin" });
    expect(await screen.findByRole("heading", { name: "All tokens" })).toBeInTheDocument();
    expect(await screen.findByRole("columnheader", { name: "Owner" })).toBeInTheDocument();
    const theirs = screen.getByRole("row", { name: /theirs/ });
    expect(theirs).toHaveTextContent("alice");
    expect(theirs).toHaveTextContent("never");
  });
});
