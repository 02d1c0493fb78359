import { useState, type FormEvent } from "react";
import { useTranslation } from "react-i18next";
import { Navigate, useSearchParams } from "react-router";
import { ApiError } from "@/shared/api/client";
import { useSession } from "@/shared/auth/session";
import { LanguageSwitcher } from "@/shared/ui/LanguageSwitcher";
import { useLogin } from "../api/login";

/** Only same-origin paths inside the console are followed after login. */
export function safeNext(next: string | null): string {
  if (!next || !next.startsWith("/") || next.startsWith("//") || next.startsWith("/login")) return "/";
  return next;
}

export function LoginPage() {
  const { t } = useTranslation();
  const [params] = useSearchParams();
  const session = useSession();
  const login = useLogin();
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const next = safeNext(params.get("next"));

  if (session.data?.authenticated) return <Navigate to={next} replace />;

  const submit = (event: FormEvent) => {
    event.preventDefault();
    login.mutate({ username, password });
  };
  const error = login.error instanceof ApiError ? login.error : null;

  return (
    <main className="login">
      <form className="login__card" onSubmit={submit} aria-labelledby="login-title">
        <div className="login__top">
          <h1 id="login-title">{t("login.title")}</h1>
          <LanguageSwitcher />
        </div>
        <p className="muted">{t("login.subtitle")}</p>
        <label className="field">
          <span>{t("login.username")}</span>
          <input name="username" autoComplete="username" value={username} required autoFocus
            onChange={(e) => setUsername(e.target.value)} />
        </label>
        <label className="field">
          <span>{t("login.password")}</span>
          <input name="password" type="password" autoComplete="current-password" value={password} required
            onChange={(e) => setPassword(e.target.value)} />
        </label>
        {login.isError ? (
          <div className="state state--error" role="alert">
            {error?.status === 401 || error?.status === 403 ? t("login.failed") : (error?.message ?? t("state.unknownError"))}
          </div>
        ) : null}
        <button type="submit" className="btn btn--primary" disabled={login.isPending}>
          {login.isPending ? t("login.signingIn") : t("login.submit")}
        </button>
        <p className="muted small">{t("login.hint")}</p>
      </form>
    </main>
  );
}
