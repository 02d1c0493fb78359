import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders } from "@/testing/render";
import { NodesPage } from "./NodesPage";

const node = (id: number, hostname: string) => ({
  id, hostname, provider: 1, provider_name: "AWS", site: null, site_name: null, pool: null, pool_name: null,
  delivery_form: "cloud_dedicated", billing_mode: "spot", expected_gpu_count: 8, expected_gpu_model: "H100",
  state: "active", labels: {}, public_endpoint: false, machine_id: null, instance_id: "", instance_type: "",
  created_at: "2026-01-01T00:00:00Z", updated_at: "2026-01-01T00:00:00Z",
});

describe("NodesPage", () => {
  it("leaves paging, filtering, search and sorting to the server", async () => {
    const api = fakeApi({
      "GET /api/v1/nodes/": { count: 10_000, results: [node(1, "aws-0001"), node(2, "aws-0002")] },
      "GET /api/v1/providers/": { count: 1, results: [{ id: 1, name: "AWS", slug: "aws" }] },
      "GET /api/v1/pools/": { count: 0, results: [] },
    });
    const user = userEvent.setup();
    renderWithProviders(<NodesPage />, { role: "viewer" });
    expect(await screen.findByRole("link", { name: "aws-0001" })).toHaveAttribute("href", "/nodes/1");
    expect(screen.getByText("1–50 of 10,000")).toBeInTheDocument();

    const lastQuery = () => Object.fromEntries(api.calls.filter((c) => c.url.pathname === "/api/v1/nodes/").at(-1)!.url.searchParams);
    await user.selectOptions(screen.getByLabelText("Billing mode"), "spot");
    await user.type(screen.getByLabelText("Search"), "aws-00");
    await waitFor(() => expect(lastQuery()).toMatchObject({ search: "aws-00" }));
    await user.click(screen.getByRole("button", { name: "State" }));
    await user.click(screen.getByRole("button", { name: "Next page" }));
    await waitFor(() => expect(lastQuery()).toMatchObject({ billing_mode: "spot", search: "aws-00", ordering: "state", page: "2", page_size: "50" }));
    expect(screen.getByRole("columnheader", { name: "State" })).toHaveAttribute("aria-sort", "ascending");
  });

  it("filters silent nodes on the server", async () => {
    const api = fakeApi({
      "GET /api/v1/nodes/": { count: 1, results: [node(3, "gcp-0003")] },
      "GET /api/v1/providers/": { count: 0, results: [] },
      "GET /api/v1/pools/": { count: 0, results: [] },
    });
    const user = userEvent.setup();
    renderWithProviders(<NodesPage />, { role: "viewer" });
    await screen.findByRole("link", { name: "gcp-0003" });
    await user.selectOptions(screen.getByLabelText("Reporting"), "true");
    await waitFor(() => {
      const last = api.calls.filter((c) => c.url.pathname === "/api/v1/nodes/").at(-1)!;
      expect(last.url.searchParams.get("silent")).toBe("true");
    });
  });

  it("says when no node matches", async () => {
    fakeApi({ "GET /api/v1/nodes/": { count: 0, results: [] }, "GET /api/v1/providers/": { count: 0, results: [] }, "GET /api/v1/pools/": { count: 0, results: [] } });
    renderWithProviders(<NodesPage />, { role: "viewer" });
    expect(await screen.findByText("No nodes match these filters.")).toBeInTheDocument();
  });
});
