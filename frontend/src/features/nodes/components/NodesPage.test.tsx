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
  }, 20_000); // many user events: slow when the test machine is busy

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

  it("shows the triage columns, sorts by severity by default and lets an operator cordon a selection", async () => {
    const now = new Date().toISOString();
    const sick = { ...node(4, "sick-1"), worst_severity: "critical", open_findings: 2, headline_party: "provider",
      last_report_at: now, silent: false, gpus_seen: 7, gpus_expected: 8 };
    const quiet = { ...node(5, "quiet-1"), worst_severity: null, open_findings: 0, headline_party: null,
      last_report_at: new Date(Date.now() - 7200_000).toISOString(), silent: true, gpus_seen: 8, gpus_expected: 8 };
    const api = fakeApi({
      "GET /api/v1/nodes/": { count: 2, results: [sick, quiet] },
      "GET /api/v1/providers/": { count: 0, results: [] },
      "GET /api/v1/pools/": { count: 0, results: [] },
      "GET /api/v1/saved-views/": [],
      "POST /api/v1/incidents/bulk/": { opened: [], refused: [{ node: 4, hostname: "sick-1", code: "incident_exists", message: "already open" }] },
    });
    const user = userEvent.setup();
    renderWithProviders(<NodesPage />, { role: "operator" });
    await screen.findByRole("link", { name: "sick-1" });
    expect(screen.getByRole("columnheader", { name: /Worst/ })).toHaveAttribute("aria-sort", "ascending");
    expect(screen.getByRole("link", { name: "2" })).toHaveAttribute("href", "/findings?node=4");
    expect(screen.getByText("7 / 8")).toHaveClass("text-bad");
    expect(screen.getByText(/^silent, 2 hr/)).toHaveClass("text-bad");
    await user.selectOptions(screen.getByLabelText("Open findings"), "true");
    await waitFor(() => {
      const last = api.calls.filter((c) => c.url.pathname === "/api/v1/nodes/").at(-1)!;
      expect(last.url.searchParams.get("has_findings")).toBe("true");
    });
    await user.click(screen.getByRole("checkbox", { name: "Select sick-1" }));
    await user.click(screen.getByRole("button", { name: "Cordon selected" }));
    expect(await screen.findByTestId("nodes-bulk-result")).toHaveTextContent("Not on sick-1: already open");
  }, 20_000);

  it("says when no node matches", async () => {
    fakeApi({ "GET /api/v1/nodes/": { count: 0, results: [] }, "GET /api/v1/providers/": { count: 0, results: [] }, "GET /api/v1/pools/": { count: 0, results: [] } });
    renderWithProviders(<NodesPage />, { role: "viewer" });
    expect(await screen.findByText("No nodes match these filters.")).toBeInTheDocument();
  });
});
