import { screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders, reply, type FakeRequest } from "@/testing/render";
import { ProvidersPage } from "./ProvidersPage";

const AWS = { id: 1, name: "AWS", slug: "aws", kind: "cloud", cloud: "aws", support_contact: "https://console.aws.amazon.com/support", notes: "", created_at: "2026-12-01T00:00:00Z" };

function providerApi() {
  const providers = [{ ...AWS }];
  return fakeApi({
    "GET /api/v1/providers/": () => ({ count: providers.length, results: providers }),
    "GET /api/v1/sites/": { count: 1, results: [{ id: 5, name: "us-east-1", provider: 1, region_code: "us-east-1", country: "US", icp_filing_required: false, created_at: "" }] },
    "PATCH /api/v1/providers/1/": (request: FakeRequest) => Object.assign(providers[0], request.body as object),
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
    expect(screen.queryAllByRole("button")).toHaveLength(0);
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
});
