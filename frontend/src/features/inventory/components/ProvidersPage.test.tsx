import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders, reply, type FakeRequest } from "@/testing/render";
import { ProvidersPage } from "./ProvidersPage";

const AWS = { id: 1, name: "AWS", slug: "aws", kind: "cloud", cloud: "aws", support_contact: "https://console.aws.amazon.com/support", notes: "", created_at: "2026-12-01T00:00:00Z" };

const SITE = { id: 5, name: "us-east-1", provider: 1, region_code: "us-east-1", country: "US", icp_filing_required: false,
  support_contact: "", provider_support_contact: AWS.support_contact, created_at: "" };
const PROTECTED = { error: { code: "protected", message: "Still referenced by nodes; delete or move those first.", fields: {} } };

function providerApi() {
  let providers = [{ ...AWS }];
  const sites = [{ ...SITE }];
  return fakeApi({
    "GET /api/v1/providers/": () => ({ count: providers.length, results: providers }),
    "GET /api/v1/sites/": () => ({ count: sites.length, results: sites }),
    "PATCH /api/v1/providers/1/": (request: FakeRequest) => {
      const body = request.body as { name?: string };
      if (body.name === "") return reply(400, { error: { code: "invalid", message: "Invalid input.", fields: { name: ["This field may not be blank."] } } });
      return Object.assign(providers[0], body);
    },
    "DELETE /api/v1/providers/1/": () => { providers = []; return reply(204); },
    "PATCH /api/v1/sites/5/": (request: FakeRequest) => Object.assign(sites[0], request.body as object),
    "DELETE /api/v1/sites/5/": reply(409, PROTECTED),
    "POST /api/v1/providers/": (request: FakeRequest) => {
      const body = request.body as { slug: string };
      if (body.slug === "aws") return reply(400, { error: { code: "invalid", message: "Invalid input.", fields: { slug: ["provider with this slug already exists."] } } });
      return reply(201, { ...AWS, ...body, id: 2 });
    },
  });
}

describe("ProvidersPage", () => {
  it("shows each provider's support contact, also beside its sites, and gives a viewer no write controls", async () => {
    providerApi();
    renderWithProviders(<ProvidersPage />, { role: "viewer" });
    const row = await screen.findByTestId("provider-row");
    expect(within(row).getByTestId("support-contact")).toHaveTextContent("console.aws.amazon.com/support");
    expect(await screen.findByTestId("sites-table")).toHaveTextContent("console.aws.amazon.com/support");
    expect(screen.getByTestId("site-contact")).toHaveTextContent("provider's: https://console.aws.amazon.com/support");
    expect(screen.queryAllByRole("button")).toHaveLength(0);
    expect(screen.queryAllByRole("textbox")).toHaveLength(0);
    expect(screen.queryByTestId("provider-form")).toBeNull();
    expect(screen.queryByTestId("site-form")).toBeNull();
  });

  it("lets an operator edit the support contact in place, with the CSRF header", async () => {
    const api = providerApi();
    document.cookie = "csrftoken=abc123";
    const user = userEvent.setup();
    renderWithProviders(<ProvidersPage />, { role: "operator" });
    const row = await screen.findByTestId("provider-row");
    await user.click(within(row).getByRole("button", { name: "Edit the support contact of AWS" }));
    const input = within(row).getByRole("textbox", { name: "Support contact of AWS" });
    await user.clear(input);
    await user.type(input, "+1 206 555 0100");
    await user.click(within(row).getByRole("button", { name: "Save" }));
    expect(await within(row).findByText("+1 206 555 0100")).toBeInTheDocument();
    const patch = api.calls.find((c) => c.method === "PATCH")!;
    expect(patch.body).toEqual({ support_contact: "+1 206 555 0100" });
    expect(patch.headers["x-csrftoken"]).toBe("abc123");
  }, 20_000);

  it("shows the server's refusal next to the field it names", async () => {
    providerApi();
    const user = userEvent.setup();
    renderWithProviders(<ProvidersPage />, { role: "operator" });
    const form = await screen.findByTestId("provider-form");
    await user.type(within(form).getByLabelText("Name"), "Another AWS");
    await user.type(within(form).getByLabelText("Slug"), "aws");
    await user.click(within(form).getByRole("button", { name: "Add provider" }));
    const slug = await within(form).findByLabelText(/^Slug/);
    expect(within(slug.closest("label")!).getByRole("alert")).toHaveTextContent("provider with this slug already exists.");
    expect(slug).toHaveAttribute("aria-invalid", "true");
  }, 20_000);

  it("edits a whole provider in the form, showing the server's field error, then saves", async () => {
    const api = providerApi();
    const user = userEvent.setup();
    renderWithProviders(<ProvidersPage />, { role: "operator" });
    await user.click(await screen.findByRole("button", { name: "Edit provider AWS" }));
    const form = screen.getByRole("form", { name: "Edit provider AWS" });
    const name = within(form).getByRole("textbox", { name: /^Name/ });
    expect(name).toHaveValue("AWS");
    await user.clear(name);
    await user.type(within(form).getByRole("textbox", { name: /^Notes/ }), "enterprise support");
    // An empty name is not blocked by the browser here (jsdom skips `required`); the server's error is shown.
    form.querySelectorAll("[required]").forEach((el) => el.removeAttribute("required"));
    await user.click(within(form).getByRole("button", { name: "Save changes" }));
    expect(await within(form).findByText("This field may not be blank.")).toBeInTheDocument();
    expect(name).toHaveAttribute("aria-invalid", "true");
    await user.type(name, "Amazon Web Services");
    await user.click(within(form).getByRole("button", { name: "Save changes" }));
    expect(await screen.findByRole("form", { name: "Add a provider" })).toBeInTheDocument();
    expect(await screen.findByText("enterprise support")).toBeInTheDocument();
    const patches = api.calls.filter((c) => c.method === "PATCH");
    expect(patches.at(-1)!.body).toMatchObject({ name: "Amazon Web Services", slug: "aws", kind: "cloud", cloud: "aws", notes: "enterprise support" });
  }, 20_000);

  it("deletes a provider only after confirmation", async () => {
    const api = providerApi();
    const user = userEvent.setup();
    renderWithProviders(<ProvidersPage />, { role: "operator" });
    await user.click(await screen.findByRole("button", { name: "Delete provider AWS" }));
    expect(api.calls.some((c) => c.method === "DELETE")).toBe(false);
    const confirm = screen.getByRole("group", { name: "Delete provider AWS" });
    expect(confirm).toHaveTextContent("Refused while nodes, pools or sites use it.");
    await user.click(within(confirm).getByRole("button", { name: "Cancel" }));
    expect(api.calls.some((c) => c.method === "DELETE")).toBe(false);
    await user.click(screen.getByRole("button", { name: "Delete provider AWS" }));
    await user.click(within(screen.getByRole("group", { name: "Delete provider AWS" })).getByRole("button", { name: "Yes, delete" }));
    expect(api.calls.filter((c) => c.method === "DELETE").map((c) => c.url.pathname)).toEqual(["/api/v1/providers/1/"]);
    await waitFor(() => expect(screen.queryByTestId("provider-row")).toBeNull());
  }, 20_000);

  it("edits a site's own support contact, and shows why a site cannot be deleted", async () => {
    const api = providerApi();
    const user = userEvent.setup();
    renderWithProviders(<ProvidersPage />, { role: "operator" });
    await user.click(await screen.findByRole("button", { name: "Edit site us-east-1" }));
    const form = screen.getByRole("form", { name: "Edit site us-east-1" });
    expect(within(form).getByRole("textbox", { name: /^Country/ })).toHaveValue("US");
    await user.type(within(form).getByRole("textbox", { name: /^Site's support contact/ }), "Equinix DC2 remote hands");
    await user.click(within(form).getByRole("button", { name: "Save changes" }));
    expect(await screen.findByTestId("site-contact")).toHaveTextContent(/^Equinix DC2 remote hands$/);
    const patch = api.calls.find((c) => c.method === "PATCH" && c.url.pathname === "/api/v1/sites/5/")!;
    expect(patch.body).toMatchObject({ name: "us-east-1", provider: 1, country: "US", support_contact: "Equinix DC2 remote hands" });

    await user.click(screen.getByRole("button", { name: "Delete site us-east-1" }));
    await user.click(within(screen.getByRole("group", { name: "Delete site us-east-1" })).getByRole("button", { name: "Yes, delete" }));
    expect(await screen.findByText("Still referenced by nodes; delete or move those first.")).toBeInTheDocument();
    expect(screen.getByTestId("site-row")).toBeInTheDocument();
  }, 20_000);
});
