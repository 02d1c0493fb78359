import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import type { Rule } from "../types/rules";
import { fakeApi, renderWithProviders } from "@/testing/render";
import { RulesPage } from "./RulesPage";

const rules: Rule[] = [
  { id: 1, slug: "gpu_memory_pressure", title: "GPU memory above threshold", description: "OOM risk.", step: "capacity",
    layer: "application", applies_to: "gpu", severity: "warning", enabled: true, duration_s: 300, clear_hold_s: 60,
    params: { threshold_pct: 95 }, updated_at: "2026-01-01T00:00:00Z",
    param_specs: [{ name: "threshold_pct", kind: "number", default: 95, help: "Memory used, percent", minimum: 1, maximum: 100 }] },
  { id: 2, slug: "xid", title: "Xid error", description: "", step: "platform_hardware", layer: "hardware", applies_to: "gpu",
    severity: "critical", enabled: true, duration_s: 0, clear_hold_s: 600, params: {}, param_specs: [], updated_at: "2026-01-01T00:00:00Z" },
];

describe("RulesPage role gates", () => {
  it("shows a viewer no write controls at all", async () => {
    fakeApi({ "GET /api/v1/rules/": rules });
    renderWithProviders(<RulesPage />, { role: "viewer" });
    expect(await screen.findByText("GPU memory above threshold")).toBeInTheDocument();
    expect(screen.queryByRole("checkbox")).toBeNull();
    expect(screen.queryByRole("spinbutton")).toBeNull();
    expect(screen.queryByRole("textbox")).toBeNull();
    expect(screen.queryByRole("button")).toBeNull();
    expect(screen.getByText("threshold (%):").parentElement).toHaveTextContent("95");
  });

  it("lets an operator change a threshold and sends it with the CSRF header", async () => {
    document.cookie = "csrftoken=test-csrf-token";
    const api = fakeApi({
      "GET /api/v1/rules/": rules,
      "PATCH /api/v1/rules/gpu_memory_pressure/": (request) => ({ ...rules[0], ...(request.body as object) }),
    });
    const user = userEvent.setup();
    renderWithProviders(<RulesPage />, { role: "operator" });
    const row = (await screen.findByText("GPU memory above threshold")).closest("tr") as HTMLElement;
    const input = within(row).getByRole("spinbutton", { name: "threshold (%)" });
    await user.clear(input);
    await user.type(input, "101");
    expect(within(row).getByRole("button", { name: "Save" })).toBeDisabled(); // above the spec's maximum
    await user.clear(input);
    await user.type(input, "90");
    await user.click(within(row).getByRole("button", { name: "Save" }));
    await waitFor(() => expect(api.calls.some((c) => c.method === "PATCH")).toBe(true));
    const patch = api.calls.find((c) => c.method === "PATCH")!;
    expect(patch.body).toEqual({ params: { threshold_pct: 90 } });
    expect(patch.headers["x-csrftoken"]).toBe("test-csrf-token");
  });

  it("lets an operator disable a rule", async () => {
    const api = fakeApi({
      "GET /api/v1/rules/": rules,
      "PATCH /api/v1/rules/xid/": (request) => ({ ...rules[1], ...(request.body as object) }),
    });
    const user = userEvent.setup();
    renderWithProviders(<RulesPage />, { role: "operator" });
    await user.click(await screen.findByRole("checkbox", { name: "Enable rule Xid error" }));
    await waitFor(() => expect(api.calls.find((c) => c.method === "PATCH")?.body).toEqual({ enabled: false }));
    expect(await screen.findByText("disabled")).toBeInTheDocument();
  });

  it("says so when the server has no rules endpoint", async () => {
    fakeApi({});
    renderWithProviders(<RulesPage />, { role: "operator" });
    expect(await screen.findByRole("note")).toHaveTextContent("Rules is not available on this server yet.");
  });
});
