import { screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders, reply, type FakeRequest } from "@/testing/render";
import { RuleOverridesPanel } from "./RuleOverridesPanel";

function api() {
  return fakeApi({
    "GET /api/v1/rule-overrides/": { count: 0, results: [] },
    "GET /api/v1/rules/": { count: 1, results: [{ slug: "gpu_thermal", name: "Thermal", step: "platform_hardware", params: {}, param_specs: {} }] },
    "GET /api/v1/pools/": { count: 1, results: [{ id: 3, name: "train-a" }] },
    "POST /api/v1/rule-overrides/": (request: FakeRequest) => {
      const body = request.body as { params: Record<string, unknown> };
      if ("nope" in body.params) return reply(400, { error: { code: "invalid", message: "Invalid input.", fields: { "params.nope": ["Unknown parameter."] } } });
      return reply(201, { id: 9, ...body });
    },
  });
}

describe("RuleOverridesPanel", () => {
  it("refuses parameters that are not a JSON object before asking the server", async () => {
    const fake = api();
    const user = userEvent.setup();
    renderWithProviders(<RuleOverridesPanel />, { role: "operator" });
    const form = await screen.findByTestId("rule-override-form");
    await within(form).findByRole("option", { name: "gpu_thermal" });
    await user.selectOptions(within(form).getByLabelText("Rule"), "gpu_thermal");
    await within(form).findByRole("option", { name: "train-a" });
    await user.selectOptions(within(form).getByLabelText("Pool"), "3");
    await user.click(within(form).getByTestId("rule-override-params"));
    await user.paste("[1, 2]");
    await user.click(within(form).getByRole("button", { name: "Add override" }));
    expect(await within(form).findByText(/must be a JSON object/)).toBeInTheDocument();
    expect(fake.calls.filter((c) => c.method === "POST")).toHaveLength(0);

    await user.clear(within(form).getByTestId("rule-override-params"));
    await user.click(within(form).getByTestId("rule-override-params"));
    await user.paste('{"nope": 1}');
    await user.click(within(form).getByRole("button", { name: "Add override" }));
    expect(await within(form).findByText("nope: Unknown parameter.")).toBeInTheDocument();
    expect(fake.calls.filter((c) => c.method === "POST")[0].body).toMatchObject({ rule: "gpu_thermal", pool: 3, params: { nope: 1 } });
  }, 20_000);

  it("offers a viewer the list only", async () => {
    api();
    renderWithProviders(<RuleOverridesPanel />, { role: "viewer" });
    expect(await screen.findByText("No rule overrides.")).toBeInTheDocument();
    expect(screen.queryByTestId("rule-override-form")).toBeNull();
  });
});
