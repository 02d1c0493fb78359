import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders, reply, type FakeRequest } from "@/testing/render";
import { BoundaryOverridesPanel } from "./BoundaryOverridesPanel";

const OVERRIDE = { id: 7, provider: 1, delivery_form: "", node: null, layer: "hardware", owner: "us", note: "contract §4", created_at: "" };

function overridesApi() {
  let rows = [{ ...OVERRIDE }];
  return fakeApi({
    "GET /api/v1/boundary-overrides/": () => ({ count: rows.length, results: rows }),
    "GET /api/v1/providers/": { count: 1, results: [{ id: 1, name: "IDC One", slug: "idc-one", kind: "idc", cloud: "", support_contact: "", notes: "", created_at: "" }] },
    "PATCH /api/v1/boundary-overrides/7/": (request: FakeRequest) => {
      const body = request.body as { layer: string };
      if (body.layer === "host_os") return reply(400, { error: { code: "invalid", message: "Invalid input.", fields: { layer: ["This cell already has an override; edit that one."] } } });
      return Object.assign(rows[0], body);
    },
    "DELETE /api/v1/boundary-overrides/7/": () => { rows = []; return reply(204); },
  });
}

describe("BoundaryOverridesPanel", () => {
  it("gives a viewer the table without any write control", async () => {
    overridesApi();
    renderWithProviders(<BoundaryOverridesPanel />, { role: "viewer" });
    expect(await screen.findByTestId("boundary-override-row")).toHaveTextContent("IDC One");
    expect(screen.queryAllByRole("button")).toHaveLength(0);
    expect(screen.queryByTestId("boundary-override-form")).toBeNull();
  });

  it("edits an override: a taken cell is named on the layer, then the new owner is saved", async () => {
    const api = overridesApi();
    const user = userEvent.setup();
    renderWithProviders(<BoundaryOverridesPanel />, { role: "operator" });
    await user.click(await screen.findByRole("button", { name: "Edit the Hardware override of IDC One" }));
    const form = screen.getByRole("form", { name: "Edit the boundary override" });
    expect(within(form).getByRole("textbox", { name: /^Note/ })).toHaveValue("contract §4");
    await user.selectOptions(within(form).getByRole("combobox", { name: /^Layer/ }), "host_os");
    await user.click(within(form).getByRole("button", { name: "Save changes" }));
    expect(await within(form).findByText("This cell already has an override; edit that one.")).toBeInTheDocument();
    await user.selectOptions(within(form).getByRole("combobox", { name: /^Layer/ }), "hardware");
    await user.selectOptions(within(form).getByRole("combobox", { name: /^Owner/ }), "shared");
    await user.click(within(form).getByRole("button", { name: "Save changes" }));
    await screen.findByRole("form", { name: "Add a boundary override" });
    expect(api.calls.filter((c) => c.method === "PATCH").at(-1)!.body).toEqual({
      provider: 1, delivery_form: "", node: null, layer: "hardware", owner: "shared", note: "contract §4" });
    expect(await screen.findByTestId("boundary-override-row")).toHaveTextContent("Shared");
  }, 20_000);

  it("deletes only after confirmation", async () => {
    const api = overridesApi();
    const user = userEvent.setup();
    renderWithProviders(<BoundaryOverridesPanel />, { role: "operator" });
    const name = "Delete the Hardware override of IDC One";
    await user.click(await screen.findByRole("button", { name }));
    expect(api.calls.some((c) => c.method === "DELETE")).toBe(false);
    const group = screen.getByRole("group", { name });
    expect(group).toHaveTextContent("The default matrix applies again.");
    await user.click(within(group).getByRole("button", { name: "Yes, delete" }));
    await waitFor(() => expect(screen.queryByTestId("boundary-override-row")).toBeNull());
  }, 20_000);
});
