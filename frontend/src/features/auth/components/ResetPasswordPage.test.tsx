import { screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders, reply, type FakeRequest } from "@/testing/render";
import { ResetPasswordPage } from "./ResetPasswordPage";

function resetApi() {
  return fakeApi({
    "GET /api/v1/auth/session/": { authenticated: false, user: null },
    "POST /api/v1/auth/password-reset/": (request: FakeRequest) => {
      const body = request.body as { password: string; token: string };
      if (body.token !== "good-token") return reply(400, { error: { code: "invalid", message: "Invalid input.", fields: { token: ["This reset link is invalid, expired or already used; ask an admin for a new one."] } } });
      if (body.password.length < 8) return reply(400, { error: { code: "invalid", message: "Invalid input.", fields: { password: ["This password is too short."] } } });
      return reply(204);
    },
  });
}

describe("ResetPasswordPage", () => {
  afterEach(() => window.history.replaceState(null, "", "/"));

  it("sets the password from the link, showing the server's password rule, and drops the token from the address bar", async () => {
    window.history.replaceState(null, "", "/reset-password#uid=Mg&token=good-token");
    const api = resetApi();
    document.cookie = "csrftoken=abc123";
    const user = userEvent.setup();
    renderWithProviders(<ResetPasswordPage />);
    expect(window.location.hash).toBe("");
    await user.type(screen.getByLabelText(/^New password(?! again)/), "short");
    await user.type(screen.getByLabelText(/^New password again/), "shorter");
    await user.click(screen.getByRole("button", { name: "Set password" }));
    expect(await screen.findByText("The two passwords differ.")).toBeInTheDocument();
    expect(api.calls.some((c) => c.method === "POST")).toBe(false);

    await user.clear(screen.getByLabelText(/^New password again/));
    await user.type(screen.getByLabelText(/^New password again/), "short");
    await user.click(screen.getByRole("button", { name: "Set password" }));
    expect(await screen.findByText("This password is too short.")).toBeInTheDocument();

    await user.clear(screen.getByLabelText(/^New password(?! again)/));
    await user.clear(screen.getByLabelText(/^New password again/));
    await user.type(screen.getByLabelText(/^New password(?! again)/), "a-long-new-password-1");
    await user.type(screen.getByLabelText(/^New password again/), "a-long-new-password-1");
    await user.click(screen.getByRole("button", { name: "Set password" }));
    expect(await screen.findByText("Your password is set.")).toBeInTheDocument();
    const post = api.calls.filter((c) => c.method === "POST").at(-1)!;
    expect(post.body).toEqual({ uid: "Mg", token: "good-token", password: "a-long-new-password-1" });
    expect(post.headers["x-csrftoken"]).toBe("abc123");
  }, 20_000);

  it("names a spent link", async () => {
    window.history.replaceState(null, "", "/reset-password#uid=Mg&token=used");
    resetApi();
    const user = userEvent.setup();
    renderWithProviders(<ResetPasswordPage />);
    await user.type(screen.getByLabelText(/^New password(?! again)/), "a-long-new-password-1");
    await user.type(screen.getByLabelText(/^New password again/), "a-long-new-password-1");
    await user.click(screen.getByRole("button", { name: "Set password" }));
    expect(await screen.findByRole("alert")).toHaveTextContent("invalid, expired or already used");
  }, 20_000);

  it("says what is missing when opened without a link", () => {
    window.history.replaceState(null, "", "/reset-password");
    resetApi();
    renderWithProviders(<ResetPasswordPage />);
    expect(screen.getByRole("alert")).toHaveTextContent("needs the whole link");
    expect(screen.queryByRole("button", { name: "Set password" })).toBeNull();
  });
});
