// API tokens: every signed-in user manages their own (admins see everyone's). A new token is read-only and
// expires unless the user asks otherwise; its key is shown once, right after creation, and never again.
import { useState, type FormEvent } from "react";
import { useTranslation } from "react-i18next";
import { ApiError } from "@/shared/api/client";
import { useCurrentUser } from "@/shared/auth/session";
import { useUrlState } from "@/shared/hooks/useUrlState";
import { formatDateTime, formatRelative } from "@/shared/lib/format";
import { Badge } from "@/shared/ui/Badge";
import { CopyButton } from "@/shared/ui/CopyButton";
import { FieldError } from "@/shared/ui/FieldError";
import { Pagination } from "@/shared/ui/Pagination";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import { TOKENS_PAGE_SIZE, useCreateToken, useRevokeToken, useTokens } from "../api/tokens";
import {
  DEFAULT_EXPIRY_DAYS, EXPIRY_DAYS, expiryInDays, expiryOnDate, tokenStatus,
  type ApiToken, type ApiTokenCreated, type TokenStatus,
} from "../types/tokens";

const STATUS_TONE: Record<TokenStatus, "good" | "muted" | "bad"> = { active: "good", expired: "muted", revoked: "bad" };
/** The request fields the form shows errors beside; any other error is shown above the form's button. */
const FORM_FIELDS = ["name", "expires_at", "write_enabled"];

/** Today as `YYYY-MM-DD` in local time, the earliest day the date picker offers. */
function localDay(now = new Date()): string {
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${now.getFullYear()}-${pad(now.getMonth() + 1)}-${pad(now.getDate())}`;
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The key, once. Dismissing it (or leaving the page) drops the only copy the browser had. */
function NewTokenKey({ token, onDone }: { token: ApiTokenCreated; onDone: () => void }) {
  const { t } = useTranslation();
  return (
    <div className="created-token" data-testid="created-api-token" role="status">
      <p><strong>{t("tokens.createdTitle", { name: token.name })}</strong> {t("tokens.shownOnce")}</p>
      <label className="field">
        <span>{t("tokens.key")}</span>
        <input readOnly value={token.key} className="mono" onFocus={(e) => e.currentTarget.select()} />
      </label>
      <p className="small muted">{t("tokens.usage")}</p>
      <div className="form-grid__actions">
        <CopyButton text={token.key} label={t("tokens.copyKey")} />
        <button type="button" className="btn" onClick={onDone}>{t("tokens.done")}</button>
      </div>
    </div>
  );
}

function CreateTokenForm() {
  const { t } = useTranslation();
  const user = useCurrentUser();
  const create = useCreateToken();
  const [name, setName] = useState("");
  const [expiry, setExpiry] = useState(String(DEFAULT_EXPIRY_DAYS));
  const [expiryDate, setExpiryDate] = useState("");
  const [writeEnabled, setWriteEnabled] = useState(false);
  const [dateError, setDateError] = useState(false);
  const fields = create.error instanceof ApiError ? create.error.fields : {};
  const otherErrors = Object.entries(fields).filter(([key]) => !FORM_FIELDS.includes(key)).flatMap(([, errors]) => errors);
  const showFormError = create.isError && (otherErrors.length > 0 || Object.keys(fields).length === 0);

  const submit = (event: FormEvent) => {
    event.preventDefault();
    let expiresAt: string | null;
    if (expiry === "date") {
      expiresAt = expiryOnDate(expiryDate);
      setDateError(expiresAt === null);
      if (expiresAt === null) return;
    } else {
      expiresAt = expiryInDays(Number(expiry));
    }
    create.mutate(
      { name: name.trim(), write_enabled: writeEnabled, expires_at: expiresAt },
      // The next token starts from the safe defaults again, so write access is never carried over by accident.
      { onSuccess: () => { setName(""); setWriteEnabled(false); } },
    );
  };

  return (
    <Panel title={t("tokens.create")}>
      <form className="form-grid" onSubmit={submit} aria-label={t("tokens.create")}>
        <label className="field">
          <span>{t("tokens.name")}</span>
          <input value={name} required maxLength={100} placeholder={t("tokens.namePlaceholder")}
            onChange={(e) => setName(e.target.value)} />
          <FieldError errors={fields.name} />
        </label>
        <label className="field">
          <span>{t("tokens.expiresIn")}</span>
          <select value={expiry} onChange={(e) => { setExpiry(e.target.value); setDateError(false); }}>
            {EXPIRY_DAYS.map((days) => <option key={days} value={days}>{t("tokens.days", { count: days })}</option>)}
            <option value="date">{t("tokens.onDate")}</option>
          </select>
          <FieldError errors={expiry === "date" ? undefined : fields.expires_at} />
        </label>
        {expiry === "date" ? (
          <label className="field">
            <span>{t("tokens.expiryDate")}</span>
            <input type="date" required min={localDay()} value={expiryDate} aria-invalid={dateError || undefined}
              onChange={(e) => { setExpiryDate(e.target.value); setDateError(false); }} />
            <FieldError errors={dateError ? [t("tokens.expiryDateInvalid")] : fields.expires_at} />
          </label>
        ) : null}
        <div className="field">
          <label className="toggle">
            <input type="checkbox" checked={writeEnabled} onChange={(e) => setWriteEnabled(e.target.checked)} />
            {t("tokens.allowWrites")}
          </label>
          <span className="small muted">{t("tokens.writeHint", { role: user ? t(`role.${user.role}`) : "" })}</span>
          <FieldError errors={fields.write_enabled} />
        </div>
        <div className="form-grid__actions">
          <button type="submit" className="btn btn--primary" disabled={create.isPending}>
            {create.isPending ? t("action.saving") : t("tokens.submit")}
          </button>
        </div>
        {showFormError ? (
          <div className="state state--error" role="alert">{[errorMessage(create.error), ...otherErrors].join(" ")}</div>
        ) : null}
      </form>
      {create.data ? <NewTokenKey token={create.data} onDone={() => create.reset()} /> : null}
    </Panel>
  );
}

function RevokeCell({ token }: { token: ApiToken }) {
  const { t } = useTranslation();
  const revoke = useRevokeToken();
  const [confirming, setConfirming] = useState(false);
  if (tokenStatus(token) === "revoked") return null;
  if (!confirming) {
    return (
      <button type="button" className="btn btn--small" aria-label={t("tokens.revokeAria", { name: token.name })}
        onClick={() => setConfirming(true)}>
        {t("tokens.revoke")}
      </button>
    );
  }
  return (
    <div role="group" aria-label={t("tokens.revokeAria", { name: token.name })}>
      <p className="small">{t("tokens.revokeConfirm", { name: token.name })}</p>
      <button type="button" className="btn btn--small btn--primary" disabled={revoke.isPending}
        onClick={() => revoke.mutate(token.id, { onSuccess: () => setConfirming(false) })}>
        {t("tokens.revokeYes")}
      </button>{" "}
      <button type="button" className="btn btn--small" onClick={() => { setConfirming(false); revoke.reset(); }}>
        {t("action.cancel")}
      </button>
      {revoke.isError ? <div className="field__error" role="alert">{errorMessage(revoke.error)}</div> : null}
    </div>
  );
}

function TokenList() {
  const { t } = useTranslation();
  const user = useCurrentUser();
  const [state, setState] = useUrlState(["page"] as const);
  const page = Math.max(1, Number(state.page) || 1);
  const tokens = useTokens(page);
  const list = tokens.data?.results ?? [];
  // An admin's list holds other people's tokens: then say whose each one is.
  const showOwner = user?.role === "admin" || Boolean(user?.is_superuser) || list.some((token) => token.user !== user?.username);
  return (
    <Panel title={showOwner ? t("tokens.listAll") : t("tokens.list")}>
      <QueryState query={tokens} what={t("tokens.list")} isEmpty={(d) => d.results.length === 0} empty={t("tokens.none")}>
        {(data) => (
          <>
            <div className="table-wrap">
              <table className="table table--compact" data-testid="api-tokens">
                <caption className="visually-hidden">{t("tokens.list")}</caption>
                <thead>
                  <tr>
                    <th scope="col">{t("tokens.name")}</th>
                    {showOwner ? <th scope="col">{t("tokens.owner")}</th> : null}
                    <th scope="col">{t("tokens.prefix")}</th>
                    <th scope="col">{t("tokens.access")}</th>
                    <th scope="col">{t("tokens.created")}</th>
                    <th scope="col">{t("tokens.expires")}</th>
                    <th scope="col">{t("tokens.lastUsed")}</th>
                    <th scope="col">{t("tokens.status")}</th>
                    <th scope="col"><span className="visually-hidden">{t("tokens.actions")}</span></th>
                  </tr>
                </thead>
                <tbody>
                  {data.results.map((token) => {
                    const status = tokenStatus(token);
                    return (
                      <tr key={token.id}>
                        <td>{token.name}</td>
                        {showOwner ? <td>{token.user}</td> : null}
                        <td><code>{token.prefix}…</code></td>
                        <td>{token.write_enabled
                          ? <Badge tone="warn">{t("tokens.readWrite")}</Badge>
                          : <Badge tone="info">{t("tokens.readOnly")}</Badge>}</td>
                        <td>{formatDateTime(token.created_at)}</td>
                        <td>{token.expires_at ? formatDateTime(token.expires_at) : t("tokens.never")}</td>
                        <td title={token.last_used_at ? formatDateTime(token.last_used_at) : undefined}>
                          {token.last_used_at ? formatRelative(token.last_used_at) : t("tokens.neverUsed")}
                        </td>
                        <td><Badge tone={STATUS_TONE[status]}>{t(`tokens.state.${status}`)}</Badge></td>
                        <td><RevokeCell token={token} /></td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
            </div>
            {data.count > TOKENS_PAGE_SIZE ? (
              <Pagination page={page} pageSize={TOKENS_PAGE_SIZE} count={data.count} label={t("tokens.pages")}
                onPage={(next) => setState({ page: next })} />
            ) : null}
          </>
        )}
      </QueryState>
    </Panel>
  );
}

export function TokensPage() {
  const { t } = useTranslation();
  return (
    <div className="page">
      <h1>{t("tokens.title")}</h1>
      <p className="muted">{t("tokens.intro")}</p>
      <CreateTokenForm />
      <TokenList />
    </div>
  );
}
