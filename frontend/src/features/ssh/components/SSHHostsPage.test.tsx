import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders, reply, type FakeRequest } from "@/testing/render";
import type { BootstrapRun, SSHHost } from "../types/ssh";
import { bootstrapProgress } from "../types/ssh";
import { SSHHostsPage } from "./SSHHostsPage";

const OFFERED = "SHA256:9xpXYPswYYiBHYyP4S72cN0tyfOnkERvUnz8ps9px24";

function host(id: number, address: string, extra: Partial<SSHHost> = {}): SSHHost {
  return {
    id, address, port: 22, username: "root", key: 1, key_name: "fleet", jump_host: null, jump_host_label: null,
    pool: 1, pool_name: "metal", node: null, node_hostname: null, host_key_state: "trusted",
    host_key_fingerprint: "SHA256:pinnedpinnedpinned", offered_fingerprint: "SHA256:pinnedpinnedpinned",
    offered_host_key: "ssh-ed25519 AAAA", offered_at: null, confirmed_by_name: "op", confirmed_at: null,
    last_contact_at: null, last_error: "", created_at: "2026-12-01T00:00:00Z", updated_at: "2026-12-01T00:00:00Z",
    ...extra,
  };
}

function run(states: BootstrapRun["hosts"][number]["state"][]): BootstrapRun {
  return {
    id: 7, pool: 1, pool_name: "metal", state: states.every((s) => ["done", "up_to_date", "failed"].includes(s)) ? "finished" : "running",
    options: {}, concurrency: 10, host_timeout_s: 600, created_by_name: "op", created_at: "2026-12-03T10:00:00Z",
    started_at: null, finished_at: null, summary: {},
    hosts: states.map((state, index) => ({
      id: index + 1, host: index + 1, host_label: `root@10.0.0.${index + 1}:22`, state,
      message: state === "failed" ? "root@10.0.0.2:22: the host refused the key SHA256:abc" : `${state}…`,
      output_tail: "", node: null, node_hostname: null, started_at: null, finished_at: null, updated_at: "2026-12-03T10:00:00Z",
    })),
  };
}

function sshApi(hosts: SSHHost[], runs: BootstrapRun[] = []) {
  return fakeApi({
    "GET /api/v1/ssh-hosts/": { count: hosts.length, results: hosts },
    "GET /api/v1/ssh-keys/": { count: 1, results: [{ id: 1, name: "fleet", public_key: "ssh-ed25519 AAAA", fingerprint: "SHA256:key", host_count: 2, created_at: "" }] },
    "GET /api/v1/pools/": { count: 1, results: [{ id: 1, name: "metal" }] },
    "GET /api/v1/ssh-bootstraps/": { count: runs.length, results: runs },
    "GET /api/v1/ssh-bootstraps/7/": () => runs[0],
    "POST /api/v1/ssh-hosts/2/confirm-host-key/": (request: FakeRequest) =>
      (request.body as { fingerprint: string }).fingerprint === OFFERED
        ? host(2, "10.0.0.2", { host_key_state: "trusted", host_key_fingerprint: OFFERED })
        : reply(400, { error: { code: "invalid", message: "Invalid input: fingerprint", fields: { fingerprint: ["not the offered key"] } } }),
    "POST /api/v1/ssh-bootstraps/": () => reply(202, runs[0]),
  });
}

describe("SSHHostsPage", () => {
  it("pins a host key only after the operator confirms the fingerprint shown", async () => {
    const api = sshApi([host(1, "10.0.0.1"), host(2, "10.0.0.2", { host_key_state: "pending", host_key_fingerprint: "", offered_fingerprint: OFFERED })]);
    const user = userEvent.setup();
    renderWithProviders(<SSHHostsPage />, { role: "operator" });
    const table = await screen.findByTestId("ssh-hosts");
    const pending = within(table).getByRole("row", { name: /10\.0\.0\.2/ });
    expect(pending).toHaveTextContent("waiting for confirmation");
    expect(within(within(table).getByRole("row", { name: /10\.0\.0\.1/ })).queryByRole("button", { name: /Confirm the host key/ })).toBeNull();

    await user.click(within(pending).getByRole("button", { name: "Confirm the host key of 10.0.0.2" }));
    expect(within(pending).getByTestId("offered-fingerprint")).toHaveTextContent(OFFERED);
    expect(api.calls.filter((c) => c.method === "POST")).toHaveLength(0); // opening the check trusts nothing
    await user.click(within(pending).getByRole("button", { name: "They match: trust this key" }));
    await waitFor(() => expect(api.calls.some((c) => c.url.pathname.endsWith("/confirm-host-key/"))).toBe(true));
    const confirm = api.calls.find((c) => c.url.pathname.endsWith("/confirm-host-key/"));
    expect(confirm?.body).toEqual({ fingerprint: OFFERED });
  });

  it("warns loudly about a changed host key", async () => {
    sshApi([host(3, "10.0.0.3", { host_key_state: "changed", host_key_fingerprint: "SHA256:old", offered_fingerprint: OFFERED,
      last_error: "host key changed: pinned SHA256:old, the host offers " + OFFERED })]);
    const user = userEvent.setup();
    renderWithProviders(<SSHHostsPage />, { role: "operator" });
    const row = within(await screen.findByTestId("ssh-hosts")).getByRole("row", { name: /10\.0\.0\.3/ });
    expect(row).toHaveTextContent("CHANGED");
    await user.click(within(row).getByRole("button", { name: "Confirm the host key of 10.0.0.3" }));
    expect(row).toHaveTextContent("The pinned key was SHA256:old");
  });

  it("bootstraps the selected hosts and shows progress per host", async () => {
    const api = sshApi([host(1, "10.0.0.1"), host(2, "10.0.0.2")], [run(["up_to_date", "failed", "installing"])]);
    const user = userEvent.setup();
    renderWithProviders(<SSHHostsPage />, { role: "operator" });
    await screen.findByTestId("ssh-hosts");
    await user.click(screen.getByRole("checkbox", { name: "Select 10.0.0.1" }));
    await user.click(screen.getByRole("checkbox", { name: "Select 10.0.0.2" }));
    await user.selectOptions(screen.getByLabelText("Enrol into pool"), "metal");
    await user.click(screen.getByRole("checkbox", { name: "reboot" }));
    await user.click(screen.getByRole("button", { name: "Install on 2 hosts" }));
    await waitFor(() => expect(api.calls.some((c) => c.method === "POST" && c.url.pathname === "/api/v1/ssh-bootstraps/")).toBe(true));
    const start = api.calls.find((c) => c.method === "POST" && c.url.pathname === "/api/v1/ssh-bootstraps/");
    expect(start?.body).toMatchObject({ pool: 1, hosts: [1, 2], options: { allow_actions: ["reboot"], offline: false } });

    const progress = await screen.findByTestId("bootstrap-hosts");
    expect(within(progress).getByRole("row", { name: /10\.0\.0\.1/ })).toHaveTextContent("already installed");
    expect(within(progress).getByRole("row", { name: /10\.0\.0\.2/ })).toHaveTextContent("refused the key");
    expect(within(progress).getByRole("row", { name: /10\.0\.0\.3/ })).toHaveTextContent("installing");
    expect(screen.getByTestId("bootstrap-run")).toHaveTextContent("2 of 3 hosts finished, 1 failed");
  });

  it("shows a viewer no controls that change anything", async () => {
    sshApi([host(2, "10.0.0.2", { host_key_state: "pending", offered_fingerprint: OFFERED })]);
    renderWithProviders(<SSHHostsPage />, { role: "viewer" });
    await screen.findByTestId("ssh-hosts");
    expect(screen.queryByRole("form", { name: "Register a host" })).toBeNull();
    expect(screen.queryByRole("button", { name: /Confirm the host key/ })).toBeNull();
    expect(screen.queryByRole("button", { name: /Install on/ })).toBeNull();
  });

  it("counts progress", () => {
    expect(bootstrapProgress(run(["done", "queued"]))).toEqual({ finished: 1, total: 2, failed: 0, running: true });
    expect(bootstrapProgress(run(["done", "failed"]))).toEqual({ finished: 2, total: 2, failed: 1, running: false });
  });
});
