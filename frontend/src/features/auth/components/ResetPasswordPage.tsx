// Setting a new password from an admin-issued reset link (no session needed). The link's token lives in the URL
// fragment; the page takes it and drops it from the address bar, so it is not left in the history or a screenshot.
import { useEffect, useState, type FormEvent } from "react";
import { useTranslation } from "react-i18next";
import { Link } from "react-router";
import { FieldError } from "@/shared/ui/FieldError";
import { FormError, fieldErrors } from "@/shared/ui/FormError";
import { LanguageSwitcher } from "@/shared/ui/LanguageSwitcher";
import { resetLinkParams, useResetPassword } from "../api/resetPassword";

export function ResetPasswordPage() {
  const { t } = useTranslation();
  const [link] = useState(() => resetLinkParams(window.location.hash));
  const reset = useResetPassword();
  const [password, setPassword] = useState("");
  const [again, setAgain] = useState("");
  const [mismatch, setMismatch] = useState(false);
  useEffect(() => {
    if (window.location.hash) window.history.replaceState(window.history.state, "", window.location.pathname);
  }, []);
  const fields = fieldErrors(reset.error);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (!link) return;
    setMismatch(password !== again);
    if (password !== again) return;
    reset.mutate({ uid: link.uid, token: link.token, password });
  };
  return (
    <main className="login">
      <form className="login__card" onSubmit={submit} aria-labelledby="reset-title" data-testid="reset-password-form">
        <div className="login__top">
          <h1 id="reset-title">{t("reset.title")}</h1>
          <LanguageSwitcher />
        </div>
        {!link ? (
          <div className="state state--error" role="alert">{t("reset.noLink")}</div>
        ) : reset.isSuccess ? (
          <p className="state state--ok" role="status">{t("reset.done")} <Link to="/login">{t("reset.signIn")}</Link></p>
        ) : (
          <>
            <p className="muted">{t("reset.intro")}</p>
            <label className="field">
              <span>{t("reset.password")}</span>
              <input type="password" autoComplete="new-password" value={password} required autoFocus
                onChange={(e) => setPassword(e.target.value)} aria-invalid={Boolean(fields.password) || undefined} />
              <FieldError errors={fields.password} />
            </label>
            <label className="field">
              <span>{t("reset.again")}</span>
              <input type="password" autoComplete="new-password" value={again} required
                onChange={(e) => setAgain(e.target.value)} aria-invalid={mismatch || undefined} />
              <FieldError errors={mismatch ? [t("reset.mismatch")] : undefined} />
            </label>
            <FieldError errors={fields.token} />
            <FormError error={reset.error} known={["password", "token"]} />
            <button type="submit" className="btn btn--primary" disabled={reset.isPending}>{t("reset.submit")}</button>
          </>
        )}
      </form>
    </main>
  );
}
