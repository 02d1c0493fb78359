import { useState } from "react";
import { useTranslation } from "react-i18next";
import { NavLink, Outlet, useNavigate } from "react-router";
import { useLogout } from "@/features/auth/api/logout";
import { useCurrentUser } from "@/shared/auth/session";
import type { Role } from "@/shared/api/types";
import { hasRole } from "@/shared/lib/domain";
import { Badge } from "@/shared/ui/Badge";
import { LanguageSwitcher } from "@/shared/ui/LanguageSwitcher";

const NAV: readonly { to: string; label: string; end: boolean; role?: Role }[] = [
  { to: "/", label: "nav.overview", end: true },
  { to: "/nodes", label: "nav.nodes", end: false },
  { to: "/findings", label: "nav.findings", end: false },
  { to: "/incidents", label: "nav.incidents", end: false },
  { to: "/rules", label: "nav.rules", end: false },
  { to: "/integrations", label: "nav.integrations", end: false },
  { to: "/enroll", label: "nav.enroll", end: false },
  { to: "/ssh", label: "nav.ssh", end: false },
  { to: "/tokens", label: "nav.tokens", end: false },
  { to: "/trends", label: "pagesNav.trends", end: false },
  { to: "/billing", label: "pagesNav.billing", end: false },
  { to: "/providers", label: "pagesNav.providers", end: false },
  { to: "/baselines", label: "pagesNav.baselines", end: false },
  { to: "/overrides", label: "pagesNav.overrides", end: false },
  { to: "/audit", label: "pagesNav.audit", end: false, role: "operator" },
  { to: "/users", label: "pagesNav.users", end: false, role: "admin" },
];

export function Layout() {
  const { t } = useTranslation();
  const user = useCurrentUser();
  const logout = useLogout();
  const navigate = useNavigate();
  // Below 760 px the navigation folds behind a menu button (styles.css); a link closes it again.
  const [menuOpen, setMenuOpen] = useState(false);
  return (
    <div className="shell">
      <a className="skip-link" href="#main">{t("nav.skip")}</a>
      <header className="topbar">
        <span className="brand">{t("app.name")}</span>
        <button type="button" className="btn btn--small menu-button" aria-expanded={menuOpen} aria-controls="main-nav"
          onClick={() => setMenuOpen(!menuOpen)} data-testid="menu-button">
          {menuOpen ? t("pagesNav.closeMenu") : t("pagesNav.menu")}
        </button>
        <nav id="main-nav" aria-label={t("nav.main")} className={`topnav${menuOpen ? " is-open" : ""}`}>
          {NAV.filter((item) => !item.role || hasRole(user, item.role)).map((item) => (
            <NavLink key={item.to} to={item.to} end={item.end} onClick={() => setMenuOpen(false)}
              className={({ isActive }) => `topnav__link${isActive ? " is-active" : ""}`}>
              {t(item.label)}
            </NavLink>
          ))}
        </nav>
        <div className="topbar__right">
          <LanguageSwitcher />
          {user ? (
            <span className="user" data-testid="current-user">
              {user.username} <Badge tone="info">{t(`role.${user.role}`)}</Badge>
            </span>
          ) : null}
          <button type="button" className="btn btn--small" onClick={() => logout.mutate(undefined, { onSettled: () => navigate("/login") })}>
            {t("nav.logout")}
          </button>
        </div>
      </header>
      <main id="main" className="content" tabIndex={-1}>
        <Outlet />
      </main>
    </div>
  );
}
