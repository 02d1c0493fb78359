// Users and roles, for admins: the list, a new user (with a role and an initial password), role changes,
// deactivation, deletion (asks first) and password resets. A reset never shows or sets a password: the admin
// gets a single-use link, shown once, to hand to the user, who picks the password (docs/security.md). The server
// decides who may do what (only a superuser changes a superuser; nobody deletes themselves); its field errors
// are shown next to the field.
import { useState, type FormEvent } from "react";
import { useTranslation } from "react-i18next";
import { ApiError } from "@/shared/api/client";
import type { Role } from "@/shared/api/types";
import { Can } from "@/shared/auth/Authorization";
import { useCurrentUser } from "@/shared/auth/session";
import { useDebounced } from "@/shared/hooks/useDebounced";
import { formatDateTime } from "@/shared/lib/format";
import { Badge } from "@/shared/ui/Badge";
import { ConfirmButton } from "@/shared/ui/ConfirmButton";
import { CopyButton } from "@/shared/ui/CopyButton";
import { FieldError } from "@/shared/ui/FieldError";
import { Pagination } from "@/shared/ui/Pagination";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import {
  PAGE_SIZE, useCreateUser, useDeleteUser, useIssueResetLink, useUpdateUser, useUsers, type User,
} from "../api/accounts";

interface IssuedLink { username: string; url: string; expiresAt: string }

const ROLES: Role[] = ["viewer", "operator", "admin"];

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function UsersPage() {
  const { t } = useTranslation();
  return (
    <div className="page" data-testid="users-page">
      <h1>{t("users.title")}</h1>
      <p className="muted">{t("users.intro")}</p>
      <Can role="admin" fallback={<div className="state state--empty" role="note">{t("users.adminsOnly")}</div>}>
        <CreateUser />
        <UserList />
      </Can>
    </div>
  );
}

function CreateUser() {
  const { t } = useTranslation();
  const create = useCreateUser();
  const [username, setUsername] = useState("");
  const [email, setEmail] = useState("");
  const [role, setRole] = useState<Role>("viewer");
  const [password, setPassword] = useState("");
  const fields = create.error instanceof ApiError ? create.error.fields : {};
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate({ username: username.trim(), email: email.trim(), role, password, is_active: true },
      { onSuccess: () => { setUsername(""); setEmail(""); setPassword(""); setRole("viewer"); } });
  };
  return (
    <Panel title={t("users.create")}>
      <form className="form-grid" onSubmit={submit} aria-label={t("users.create")} data-testid="user-form">
        <label className="field"><span>{t("users.username")}</span>
          <input value={username} required maxLength={150} onChange={(e) => setUsername(e.target.value)} aria-invalid={Boolean(fields.username) || undefined} />
          <FieldError errors={fields.username} /></label>
        <label className="field"><span>{t("users.email")}</span>
          <input type="email" value={email} onChange={(e) => setEmail(e.target.value)} aria-invalid={Boolean(fields.email) || undefined} />
          <FieldError errors={fields.email} /></label>
        <label className="field"><span>{t("users.role")}</span>
          <select value={role} onChange={(e) => setRole(e.target.value as Role)}>
            {ROLES.map((r) => <option key={r} value={r}>{t(`role.${r}`)}</option>)}
          </select>
          <FieldError errors={fields.role} /></label>
        <label className="field"><span>{t("users.password")}</span>
          <input type="password" autoComplete="new-password" value={password} required onChange={(e) => setPassword(e.target.value)} aria-invalid={Boolean(fields.password) || undefined} />
          <FieldError errors={fields.password} /></label>
        <div className="form-grid__actions">
          <button type="submit" className="btn btn--primary" disabled={create.isPending}>{create.isPending ? t("action.saving") : t("users.submit")}</button>
        </div>
        {create.isError && !Object.keys(fields).some((k) => ["username", "email", "role", "password"].includes(k))
          ? <div className="state state--error" role="alert">{errorText(create.error)}</div> : null}
        {create.isSuccess ? <p className="state state--ok" role="status">{t("users.created", { name: create.data.username })}</p> : null}
      </form>
    </Panel>
  );
}

function UserRow({ user, self, onLink }: { user: User; self: boolean; onLink: (link: IssuedLink) => void }) {
  const { t } = useTranslation();
  const update = useUpdateUser();
  const remove = useDeleteUser();
  const issue = useIssueResetLink();
  const fields = update.error instanceof ApiError ? update.error.fields : {};
  const resetLink = () => issue.mutate(user.id, {
    onSuccess: (link) => onLink({ username: user.username, url: `${window.location.origin}${link.path}`, expiresAt: link.expires_at }),
  });
  return (
    <tr data-testid="user-row">
      <th scope="row">{user.username} {user.is_superuser ? <Badge tone="info">{t("users.superuser")}</Badge> : null}
        {self ? <span className="muted small"> {t("users.you")}</span> : null}</th>
      <td>{user.email || "—"}</td>
      <td>
        <select aria-label={t("users.roleOf", { name: user.username })} value={user.role} disabled={update.isPending || self}
          onChange={(e) => update.mutate({ id: user.id, body: { role: e.target.value as Role } })}>
          {ROLES.map((r) => <option key={r} value={r}>{t(`role.${r}`)}</option>)}
        </select>
        <FieldError errors={fields.role} />
      </td>
      <td>
        <span className="row-actions">
          {user.is_active ? <Badge tone="good">{t("users.active")}</Badge> : <Badge tone="muted">{t("users.inactive")}</Badge>}
          {self ? null : user.is_active ? (
            // Deactivating revokes the user's API tokens for good (reactivating brings none back): it asks first.
            <ConfirmButton label={t("users.deactivate")} ariaLabel={t("users.deactivateAria", { name: user.username })}
              warning={t("users.deactivateWarning")} confirmLabel={t("users.deactivateYes")} pending={update.isPending}
              onConfirm={() => update.mutate({ id: user.id, body: { is_active: false } })} />
          ) : (
            <button type="button" className="btn btn--small" disabled={update.isPending} aria-label={t("users.activateAria", { name: user.username })}
              onClick={() => update.mutate({ id: user.id, body: { is_active: true } })}>{t("users.activate")}</button>
          )}
        </span>
        <FieldError errors={fields.is_active} />
        {update.isError && !fields.role && !fields.is_active ? <span className="field__error" role="alert">{errorText(update.error)}</span> : null}
      </td>
      <td>{formatDateTime(user.last_login)}</td>
      <td>
        {self ? null : (
          <div className="row-actions">
            {user.is_active ? (
              <button type="button" className="btn btn--small" disabled={issue.isPending} onClick={resetLink}
                aria-label={t("users.resetAria", { name: user.username })}>{t("users.reset")}</button>
            ) : null}
            <ConfirmButton label={t("form.delete")} ariaLabel={t("users.deleteAria", { name: user.username })}
              warning={t("users.deleteWarning")} pending={remove.isPending} error={remove.error}
              onConfirm={() => remove.mutate(user.id)} />
          </div>
        )}
        {issue.isError ? <span className="field__error" role="alert">{errorText(issue.error)}</span> : null}
      </td>
    </tr>
  );
}

/** The reset link, once: it lives only in this component's state; "done" (or leaving the page) drops it. */
function ResetLink({ link, onDone }: { link: IssuedLink; onDone: () => void }) {
  const { t } = useTranslation();
  return (
    <div className="secret-once" role="status" data-testid="reset-link">
      <p><strong>{t("users.linkTitle", { name: link.username })}</strong> {t("users.linkOnce", { when: formatDateTime(link.expiresAt) })}</p>
      <label className="field"><span>{t("users.link")}</span>
        <input readOnly value={link.url} className="mono" onFocus={(e) => e.currentTarget.select()} /></label>
      <div className="form-grid__actions">
        <CopyButton text={link.url} label={t("users.copyLink")} />
        <button type="button" className="btn" onClick={onDone}>{t("tokens.done")}</button>
      </div>
    </div>
  );
}

function UserList() {
  const { t } = useTranslation();
  const me = useCurrentUser();
  const [page, setPage] = useState(1);
  const [search, setSearch] = useState("");
  const debounced = useDebounced(search, 300);
  const users = useUsers(page, debounced);
  const [link, setLink] = useState<IssuedLink | null>(null);
  return (
    <Panel title={t("users.list")} actions={(
      <label className="field field--inline"><span>{t("users.search")}</span>
        <input type="search" value={search} onChange={(e) => { setSearch(e.target.value); setPage(1); }} /></label>
    )}>
      {link ? <ResetLink link={link} onDone={() => setLink(null)} /> : null}
      <QueryState query={users} what={t("users.list")} isEmpty={(d) => d.count === 0}>
        {(data) => (
          <>
            <div className="table-wrap">
              <table className="table" data-testid="users-table">
                <caption className="visually-hidden">{t("users.list")}</caption>
                <thead><tr>
                  <th scope="col">{t("users.username")}</th><th scope="col">{t("users.email")}</th><th scope="col">{t("users.role")}</th>
                  <th scope="col">{t("users.status")}</th><th scope="col">{t("users.lastLogin")}</th>
                  <th scope="col"><span className="visually-hidden">{t("overrides.actions")}</span></th>
                </tr></thead>
                <tbody>{data.results.map((user) => <UserRow key={user.id} user={user} self={user.id === me?.id} onLink={setLink} />)}</tbody>
              </table>
            </div>
            <Pagination page={page} pageSize={PAGE_SIZE} count={data.count} onPage={setPage} label={t("users.list")} />
          </>
        )}
      </QueryState>
    </Panel>
  );
}
