import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders } from "@/testing/render";
import { EnrollPage } from "./EnrollPage";

const providers = { count: 1, results: [{ id: 3, name: "AWS", slug: "aws", kind: "cloud", cloud: "aws" }] };

describe("EnrollPage", () => {
  it("gives a viewer no form and no token list", async () => {
    const api = fakeApi({ "GET /api/v1/providers/": providers });
    renderWithProviders(<EnrollPage />, { role: "viewer" });
    expect(screen.getByText(/created by operators/)).toBeInTheDocument();
    expect(screen.queryByRole("button", { name: "Create token" })).toBeNull();
    expect(screen.queryByRole("form")).toBeNull();
    expect(api.calls.filter((c) => c.url.pathname.includes("enrollment-tokens"))).toHaveLength(0);
  });

  it("creates a token for an operator and shows the one-line install command", async () => {
    const command = "curl -fsSL http://127.0.0.1:8000/install.sh | sudo sh -s -- --token fleet_enr_abc";
    const api = fakeApi({
      "GET /api/v1/providers/": providers,
      "GET /api/v1/pools/": { count: 0, results: [] },
      "GET /api/v1/enrollment-tokens/": { count: 0, results: [] },
      "POST /api/v1/enrollment-tokens/": (request) => ({ id: 9, ...(request.body as object), key: "fleet_enr_abc", install_command: command }),
    });
    const user = userEvent.setup();
    renderWithProviders(<EnrollPage />, { role: "operator" });
    await user.type(screen.getByLabelText("Name"), "h100 spot");
    await screen.findByRole("option", { name: "AWS" });
    await user.selectOptions(screen.getByLabelText("Provider"), "3");
    await user.click(screen.getByRole("button", { name: "Create token" }));
    expect(await screen.findByDisplayValue(command)).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Copy command" })).toBeInTheDocument();
    await waitFor(() => expect(api.calls.find((c) => c.method === "POST")?.body).toMatchObject({
      name: "h100 spot", provider: 3, delivery_form: "cloud_dedicated", billing_mode: "on_demand",
    }));
  });
});
