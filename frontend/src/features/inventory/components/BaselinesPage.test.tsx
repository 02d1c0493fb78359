import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders, reply, type FakeRequest } from "@/testing/render";
import { BaselinesPage } from "./BaselinesPage";

const H100 = { id: 4, name: "h100-train", pool: 3, node: null, driver_version: "550.54.15", cuda_driver_version: "12.4", os: "Ubuntu 22.04",
  kernel: "5.15.0", gpu_model: "NVIDIA H100 80GB HBM3", gpu_count: 8, gpu_memory_bytes: null, updated_at: "2026-12-01T00:00:00Z" };

function baselineApi() {
  let baselines = [{ ...H100 }];
  return fakeApi({
    "GET /api/v1/baselines/": () => ({ count: baselines.length, results: baselines }),
    "GET /api/v1/pools/": { count: 1, results: [{ id: 3, name: "train-a" }] },
    "PATCH /api/v1/baselines/4/": (request: FakeRequest) => {
      const body = request.body as { gpu_count: unknown };
      if (typeof body.gpu_count !== "number" && body.gpu_count !== null) {
        return reply(400, { error: { code: "invalid", message: "Invalid input.", fields: { gpu_count: ["A valid integer is required."] } } });
      }
      return Object.assign(baselines[0], body);
    },
    "DELETE /api/v1/baselines/4/": () => { baselines = []; return reply(204); },
    "POST /api/v1/baselines/": (request: FakeRequest) => reply(400, { error: { code: "invalid", message: "Invalid input.",
      fields: { pool: ["Set exactly one of pool or node."] } }, ...(request.body ? {} : {}) }),
  });
}

describe("BaselinesPage", () => {
  it("gives a viewer the list without any write control", async () => {
    baselineApi();
    renderWithProviders(<BaselinesPage />, { role: "viewer" });
    expect(await screen.findByTestId("baseline-row")).toHaveTextContent("h100-train");
    expect(screen.queryAllByRole("button")).toHaveLength(0);
    expect(screen.queryByTestId("baseline-form")).toBeNull();
  });

  it("edits a baseline: the server's error beside the field, then the saved values in the list", async () => {
    const api = baselineApi();
    const user = userEvent.setup();
    renderWithProviders(<BaselinesPage />, { role: "operator" });
    await user.click(await screen.findByRole("button", { name: "Edit baseline h100-train" }));
    const form = screen.getByRole("form", { name: "Edit baseline h100-train" });
    expect(within(form).getByRole("textbox", { name: /^Driver/ })).toHaveValue("550.54.15");
    const count = within(form).getByRole("textbox", { name: /^GPUs per node/ });
    await user.clear(count);
    await user.type(count, "eight");
    await user.click(within(form).getByRole("button", { name: "Save changes" }));
    expect(await within(count.closest("label")!).findByRole("alert")).toHaveTextContent("A valid integer is required.");
    expect(count).toHaveAttribute("aria-invalid", "true");
    expect(api.calls.find((c) => c.method === "PATCH")!.body).toMatchObject({ gpu_count: "eight" });

    const driver = within(form).getByRole("textbox", { name: /^Driver/ });
    await user.clear(driver);
    await user.type(driver, "560.35.03");
    await user.clear(count);
    await user.type(count, "8");
    await user.click(within(form).getByRole("button", { name: "Save changes" }));
    expect(await screen.findByRole("form", { name: "Add a baseline" })).toBeInTheDocument();
    expect(await screen.findByText("560.35.03")).toBeInTheDocument();
    expect(api.calls.filter((c) => c.method === "PATCH").at(-1)!.body).toMatchObject({ name: "h100-train", pool: 3, node: null, driver_version: "560.35.03", gpu_count: 8 });
  }, 20_000);

  it("names the pool field when the server refuses a new baseline", async () => {
    baselineApi();
    const user = userEvent.setup();
    renderWithProviders(<BaselinesPage />, { role: "operator" });
    const form = await screen.findByRole("form", { name: "Add a baseline" });
    await user.type(within(form).getByRole("textbox", { name: /^Name/ }), "a100");
    await user.click(within(form).getByRole("button", { name: "Add baseline" }));
    const pool = within(form).getByRole("combobox", { name: /^Pool/ });
    expect(await within(pool.closest("label")!).findByRole("alert")).toHaveTextContent("Set exactly one of pool or node.");
  }, 20_000);

  it("deletes only after confirmation", async () => {
    const api = baselineApi();
    const user = userEvent.setup();
    renderWithProviders(<BaselinesPage />, { role: "operator" });
    await user.click(await screen.findByRole("button", { name: "Delete baseline h100-train" }));
    expect(api.calls.some((c) => c.method === "DELETE")).toBe(false);
    await user.click(within(screen.getByRole("group", { name: "Delete baseline h100-train" })).getByRole("button", { name: "Yes, delete" }));
    await waitFor(() => expect(screen.queryByTestId("baseline-row")).toBeNull());
    expect(api.calls.filter((c) => c.method === "DELETE")).toHaveLength(1);
  }, 20_000);
});
