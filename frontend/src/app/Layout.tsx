import { useTranslation } from "react-i18next";
import { NavLink, Outlet, useNavigate } from "react-router";
import { useLogout } from "@/features/auth/api/logout";
import { useCurrentUser } from "@/shared/auth/session";
import { Badge } from "@/shared/ui/Badge";
import { LanguageSwitcher } from "@/shared/ui/LanguageSwitcher";

const NAV = [
  { to: "/", label: "nav.overview", end: true },
  { to: "/nodes", label: "nav.nodes", end: false },
  { to: "/findings", label: "nav.findings", end: false },
  { to: "/incidents", label: "nav.incidents", end: false },
  { to: "/rules", label: "nav.rules", end: false },
  { to: "/integrations", label: "nav.integrations", end: false },
  { to: "/enroll", label: "nav.enroll", end: false },
  { to: "/ssh", label: "nav.ssh", end: false },
  { to: "/tokens", label: "nav.tokens", end: false },
] as const;

export function Layout() {
  const { t } = useTranslation();
  const user = useCurrentUser();
  const logout = useLogout();
  const navigate = useNavigate();
  return (
    <div className="shell">
      <a className="skip-link" href="#main">{t("nav.skip")}</a>
      <header className="topbar">
        <span className="brand">{t("app.name")}</span>
        <nav aria-label={t("nav.main")} className="topnav">
          {NAV.map((item) => (
            <NavLink key={item.to} to={item.to} end={item.end} className={({ isActive }) => `topnav__link${isActive ? " is-active" : ""}`}>
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
