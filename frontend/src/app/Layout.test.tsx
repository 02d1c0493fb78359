import { screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { Route, Routes } from "react-router";
import { describe, expect, it } from "vitest";
import { fakeApi, renderWithProviders } from "@/testing/render";
import { Layout } from "./Layout";

function renderLayout(role: "viewer" | "operator" | "admin") {
  fakeApi({});
  return renderWithProviders(
    <Routes><Route element={<Layout />}><Route path="*" element={<p>page</p>} /></Route></Routes>, { role, route: "/" });
}

describe("Layout", () => {
  it("reaches every capability page from the navigation, audit for operators and users for admins", () => {
    renderLayout("admin");
    const nav = screen.getByRole("navigation", { name: "Main" });
    for (const name of ["Trends", "Billing", "Providers", "Baselines", "Overrides", "Audit log", "Users", "API tokens"]) {
      expect(within(nav).getByRole("link", { name })).toBeInTheDocument();
    }
  });

  it("hides the audit log from viewers and the users page from operators", () => {
    renderLayout("viewer");
    let nav = screen.getByRole("navigation", { name: "Main" });
    expect(within(nav).queryByRole("link", { name: "Audit log" })).toBeNull();
    expect(within(nav).queryByRole("link", { name: "Users" })).toBeNull();
    document.body.innerHTML = "";
    renderLayout("operator");
    nav = screen.getByRole("navigation", { name: "Main" });
    expect(within(nav).getByRole("link", { name: "Audit log" })).toBeInTheDocument();
    expect(within(nav).queryByRole("link", { name: "Users" })).toBeNull();
  });

  it("folds the navigation behind a menu button that a link closes again", async () => {
    const user = userEvent.setup();
    renderLayout("viewer");
    const menu = screen.getByTestId("menu-button");
    const nav = screen.getByRole("navigation", { name: "Main" });
    expect(menu).toHaveAttribute("aria-expanded", "false");
    expect(menu).toHaveAttribute("aria-controls", nav.id);
    await user.click(menu);
    expect(menu).toHaveAttribute("aria-expanded", "true");
    expect(nav).toHaveClass("is-open");
    expect(menu).toHaveTextContent("Close menu");
    await user.click(within(nav).getByRole("link", { name: "Trends" }));
    expect(menu).toHaveAttribute("aria-expanded", "false");
    expect(nav).not.toHaveClass("is-open");
  });
});
