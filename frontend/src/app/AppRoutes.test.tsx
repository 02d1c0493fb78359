import { QueryClientProvider } from "@tanstack/react-query";
import { render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { MemoryRouter } from "react-router";
import { describe, expect, it } from "vitest";
import { fakeApi, reply, testQueryClient, userWithRole } from "@/testing/render";
import { AppRoutes } from "./AppRoutes";

function renderApp(route: string) {
  return render(
    <QueryClientProvider client={testQueryClient()}>
      <MemoryRouter initialEntries={[route]}>
        <AppRoutes />
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

const emptyPage = { count: 0, results: [] };

describe("session flow", () => {
  it("sends a logged-out visitor to the login page and back to where they were going", async () => {
    let loggedIn = false;
    const api = fakeApi({
      "GET /api/v1/auth/session/": () => (loggedIn ? { authenticated: true, user: userWithRole("viewer") } : { authenticated: false, user: null }),
      "POST /api/v1/auth/session/": (request) => {
        const { username, password } = request.body as { username: string; password: string };
        if (password !== "right") return reply(401, { error: { code: "authentication_failed", message: "Wrong username or password." } });
        loggedIn = true;
        return { authenticated: true, user: { ...userWithRole("viewer"), username } };
      },
      "GET /api/v1/findings/": emptyPage,
      "GET /api/v1/providers/": emptyPage,
      "GET /api/v1/pools/": emptyPage,
    });
    const user = userEvent.setup();
    renderApp("/findings?severity=critical");

    expect(await screen.findByRole("heading", { name: "GPU Fleet Console" })).toBeInTheDocument();
    await user.type(screen.getByLabelText("Username"), "ops");
    await user.type(screen.getByLabelText("Password"), "wrong");
    await user.click(screen.getByRole("button", { name: "Sign in" }));
    expect(await screen.findByRole("alert")).toHaveTextContent("Wrong username or password.");

    await user.clear(screen.getByLabelText("Password"));
    await user.type(screen.getByLabelText("Password"), "right");
    await user.click(screen.getByRole("button", { name: "Sign in" }));
    expect(await screen.findByRole("heading", { level: 1, name: "Findings" })).toBeInTheDocument();
    await waitFor(() => expect(api.calls.some((c) => c.url.pathname === "/api/v1/findings/" && c.url.searchParams.get("severity") === "critical")).toBe(true));
    expect(screen.getByTestId("current-user")).toHaveTextContent("ops");
  });

  it("hides nothing a viewer may read but shows the viewer note on the enrolment page", async () => {
    fakeApi({ "GET /api/v1/auth/session/": { authenticated: true, user: userWithRole("viewer") } });
    renderApp("/enroll");
    expect(await screen.findByText(/created by operators/)).toBeInTheDocument();
    expect(screen.queryByRole("button", { name: "Create token" })).toBeNull();
  });

  it("gives every signed-in user, viewers too, the API tokens page in the navigation", async () => {
    fakeApi({
      "GET /api/v1/auth/session/": { authenticated: true, user: userWithRole("viewer") },
      "GET /api/v1/tokens/": emptyPage,
    });
    const user = userEvent.setup();
    renderApp("/no-such-page");
    await user.click(await screen.findByRole("link", { name: "API tokens" }));
    expect(await screen.findByRole("heading", { level: 1, name: "API tokens" })).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Create token" })).toBeInTheDocument();
  });
});
