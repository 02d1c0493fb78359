import { screen, waitFor, within } from "@testing-library/react";
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

  it("edits an override with the whole body (PUT), so a parameter taken out is dropped, and deletes after confirmation", async () => {
    let rows = [{ id: 9, rule: "gpu_thermal", pool: 3, params: { max_c: 85, min_s: 30 }, enabled: null, duration_s: 60, clear_hold_s: null, note: "hot row", updated_at: "2026-12-01T00:00:00Z" }];
    const fake = fakeApi({
      "GET /api/v1/rule-overrides/": () => ({ count: rows.length, results: rows }),
      "GET /api/v1/rules/": { count: 1, results: [{ slug: "gpu_thermal", name: "Thermal", step: "platform_hardware", params: {}, param_specs: {} }] },
      "GET /api/v1/pools/": { count: 1, results: [{ id: 3, name: "train-a" }] },
      "PUT /api/v1/rule-overrides/9/": (request: FakeRequest) => Object.assign(rows[0], request.body as object),
      "DELETE /api/v1/rule-overrides/9/": () => { rows = []; return reply(204); },
    });
    const user = userEvent.setup();
    renderWithProviders(<RuleOverridesPanel />, { role: "operator" });
    await within(await screen.findByTestId("rule-override-row")).findByText("train-a");
    await user.click(screen.getByRole("button", { name: "Edit the override of gpu_thermal for train-a" }));
    const form = screen.getByRole("form", { name: "Edit the override of gpu_thermal" });
    const params = within(form).getByTestId("rule-override-params");
    expect(params).toHaveValue('{"max_c":85,"min_s":30}');
    await user.clear(params);
    await user.click(params);
    await user.paste('{"max_c": 88}');
    await user.selectOptions(within(form).getByRole("combobox", { name: /^Enabled/ }), "false");
    await user.click(within(form).getByRole("button", { name: "Save changes" }));
    await screen.findByRole("form", { name: "Add a rule override" });
    expect(fake.calls.find((c) => c.method === "PUT")!.body).toEqual({
      rule: "gpu_thermal", pool: 3, params: { max_c: 88 }, note: "hot row", enabled: false, duration_s: 60 });
    expect(fake.calls.some((c) => c.method === "PATCH")).toBe(false);

    const name = "Delete the override of gpu_thermal for train-a";
    await user.click(screen.getByRole("button", { name }));
    expect(fake.calls.some((c) => c.method === "DELETE")).toBe(false);
    await user.click(within(screen.getByRole("group", { name })).getByRole("button", { name: "Yes, delete" }));
    expect(await screen.findByText("No rule overrides.")).toBeInTheDocument();
    await waitFor(() => expect(fake.calls.filter((c) => c.method === "DELETE")).toHaveLength(1));
  }, 20_000);
});
