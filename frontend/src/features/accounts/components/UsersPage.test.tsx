import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders, reply, type FakeRequest } from "@/testing/render";
import { UsersPage } from "./UsersPage";

// The signed-in admin of renderWithProviders has id 1.
const ME = { id: 1, username: "admin-user", email: "", role: "admin", is_active: true, is_superuser: false, last_login: null, date_joined: "" };
const BOB = { id: 2, username: "bob", email: "bob@example.com", role: "viewer", is_active: true, is_superuser: false, last_login: null, date_joined: "" };

function usersApi() {
  let users = [{ ...ME }, { ...BOB }];
  return fakeApi({
    "GET /api/v1/users/": () => ({ count: users.length, results: users }),
    "PATCH /api/v1/users/2/": (request: FakeRequest) => Object.assign(users[1], request.body as object),
    "DELETE /api/v1/users/2/": () => { users = users.filter((u) => u.id !== 2); return reply(204); },
    "POST /api/v1/users/2/password-reset/": { path: "/reset-password#uid=Mg&token=abc-123", expires_at: "2026-12-04T19:00:00Z" },
  });
}

describe("UsersPage", () => {
  it("tells a non-admin that only admins manage users and shows no controls", async () => {
    usersApi();
    renderWithProviders(<UsersPage />, { role: "operator" });
    expect(screen.getByRole("note")).toHaveTextContent("Only admins manage users.");
    expect(screen.queryAllByRole("button")).toHaveLength(0);
    expect(screen.queryAllByRole("combobox")).toHaveLength(0);
  });

  it("changes a role, and offers no role change, reset or delete on the admin's own row", async () => {
    const api = usersApi();
    document.cookie = "csrftoken=abc123";
    const user = userEvent.setup();
    renderWithProviders(<UsersPage />, { role: "admin" });
    const mine = await screen.findByRole("combobox", { name: "Role of admin-user" });
    expect(mine).toBeDisabled();
    expect(screen.queryByRole("button", { name: "Delete user admin-user" })).toBeNull();
    expect(screen.queryByRole("button", { name: "Reset the password of admin-user" })).toBeNull();
    await user.selectOptions(screen.getByRole("combobox", { name: "Role of bob" }), "operator");
    await waitFor(() => expect(api.calls.find((c) => c.method === "PATCH")?.body).toEqual({ role: "operator" }));
    expect(api.calls.find((c) => c.method === "PATCH")!.headers["x-csrftoken"]).toBe("abc123");
  }, 20_000);

  it("shows a reset link once, never a password, and drops it when done", async () => {
    const api = usersApi();
    const user = userEvent.setup();
    renderWithProviders(<UsersPage />, { role: "admin" });
    await user.click(await screen.findByRole("button", { name: "Reset the password of bob" }));
    const box = await screen.findByTestId("reset-link");
    expect(box).toHaveTextContent("Password reset link for bob.");
    expect(box).toHaveTextContent("Shown once");
    expect(within(box).getByRole("textbox", { name: "Link" })).toHaveValue(`${window.location.origin}/reset-password#uid=Mg&token=abc-123`);
    expect(api.calls.find((c) => c.method === "POST")!.body).toBeUndefined();
    await user.click(within(box).getByRole("button", { name: "I have copied it" }));
    expect(screen.queryByTestId("reset-link")).toBeNull();
    expect(document.body.textContent).not.toContain("abc-123");
  }, 20_000);

  it("deletes a user only after confirmation", async () => {
    const api = usersApi();
    const user = userEvent.setup();
    renderWithProviders(<UsersPage />, { role: "admin" });
    await user.click(await screen.findByRole("button", { name: "Delete user bob" }));
    expect(api.calls.some((c) => c.method === "DELETE")).toBe(false);
    const group = screen.getByRole("group", { name: "Delete user bob" });
    expect(group).toHaveTextContent("API tokens stop working");
    await user.click(within(group).getByRole("button", { name: "Yes, delete" }));
    await waitFor(() => expect(screen.queryByText("bob@example.com")).toBeNull());
    expect(api.calls.filter((c) => c.method === "DELETE").map((c) => c.url.pathname)).toEqual(["/api/v1/users/2/"]);
  }, 20_000);

  it("deactivates only after a warning that tokens are revoked for good, and activates again in one click", async () => {
    const api = usersApi();
    const user = userEvent.setup();
    renderWithProviders(<UsersPage />, { role: "admin" });
    expect(screen.queryByRole("button", { name: "Deactivate admin-user" })).toBeNull();
    await user.click(await screen.findByRole("button", { name: "Deactivate bob" }));
    expect(api.calls.some((c) => c.method === "PATCH")).toBe(false);
    const group = screen.getByRole("group", { name: "Deactivate bob" });
    expect(group).toHaveTextContent("API tokens are revoked for good");
    await user.click(within(group).getByRole("button", { name: "Yes, deactivate" }));
    await waitFor(() => expect(api.calls.find((c) => c.method === "PATCH")?.body).toEqual({ is_active: false }));
    await user.click(await screen.findByRole("button", { name: "Activate bob" }));
    await waitFor(() => expect(api.calls.filter((c) => c.method === "PATCH").at(-1)?.body).toEqual({ is_active: true }));
    expect(await screen.findByRole("button", { name: "Deactivate bob" })).toBeInTheDocument();
  }, 20_000);
});
