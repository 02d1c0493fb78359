// Enrolment: an operator creates a token and copies the one-line install command (docs/telemetry.md, Enrolment).
import { useState, type FormEvent } from "react";
import { useTranslation } from "react-i18next";
import { ApiError } from "@/shared/api/client";
import { usePools, useProviders } from "@/shared/api/lookups";
import type { BillingMode, DeliveryForm } from "@/shared/api/types";
import { useHasRole } from "@/shared/auth/Authorization";
import { BILLING_MODES, DELIVERY_FORMS } from "@/shared/lib/domain";
import { formatDateTime } from "@/shared/lib/format";
import { Badge } from "@/shared/ui/Badge";
import { CopyButton } from "@/shared/ui/CopyButton";
import { FieldError } from "@/shared/ui/FieldError";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import { useCreateEnrollmentToken, useEnrollmentTokens, useRevokeEnrollmentToken } from "../api/enrollmentTokens";
import type { EnrollmentTokenCreated } from "../types/tokens";

export function CreatedToken({ token }: { token: EnrollmentTokenCreated }) {
  const { t } = useTranslation();
  return (
    <div className="created-token" data-testid="created-token" role="status">
      <p><strong>{t("enroll.createdTitle", { name: token.name })}</strong> {t("enroll.shownOnce")}</p>
      <label className="field">
        <span>{t("enroll.installCommand")}</span>
        <textarea readOnly rows={3} value={token.install_command} onFocus={(e) => e.currentTarget.select()} className="mono" />
      </label>
      <CopyButton text={token.install_command} label={t("enroll.copyCommand")} />
      <details>
        <summary>{t("enroll.showKey")}</summary>
        <code className="mono">{token.key}</code> <CopyButton text={token.key} label={t("enroll.copyKey")} />
      </details>
    </div>
  );
}

function CreateTokenForm() {
  const { t } = useTranslation();
  const providers = useProviders();
  const pools = usePools();
  const create = useCreateEnrollmentToken();
  const [name, setName] = useState("");
  const [provider, setProvider] = useState("");
  const [pool, setPool] = useState("");
  const [deliveryForm, setDeliveryForm] = useState<DeliveryForm>("cloud_dedicated");
  const [billingMode, setBillingMode] = useState<BillingMode>("on_demand");
  const [expiresHours, setExpiresHours] = useState("24");
  const [maxUses, setMaxUses] = useState("");
  const fields = create.error instanceof ApiError ? create.error.fields : {};

  const choosePool = (value: string) => {
    setPool(value);
    const chosen = pools.data?.find((p) => String(p.id) === value);
    if (chosen) {
      if (chosen.provider) setProvider(String(chosen.provider));
      if (chosen.delivery_form) setDeliveryForm(chosen.delivery_form as DeliveryForm);
      if (chosen.billing_mode) setBillingMode(chosen.billing_mode as BillingMode);
    }
  };

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const hours = Number(expiresHours);
    create.mutate({
      name,
      provider: Number(provider),
      pool: pool ? Number(pool) : null,
      delivery_form: deliveryForm,
      billing_mode: billingMode,
      expires_at: hours > 0 ? new Date(Date.now() + hours * 3600_000).toISOString() : null,
      max_uses: maxUses ? Number(maxUses) : null,
    });
  };

  return (
    <Panel title={t("enroll.create")}>
      <form className="form-grid" onSubmit={submit} aria-label={t("enroll.create")}>
        <label className="field">
          <span>{t("enroll.name")}</span>
          <input value={name} required maxLength={100} onChange={(e) => setName(e.target.value)} placeholder={t("enroll.namePlaceholder")} />
          <FieldError errors={fields.name} />
        </label>
        <label className="field">
          <span>{t("nodes.col.pool")}</span>
          <select value={pool} onChange={(e) => choosePool(e.target.value)}>
            <option value="">{t("enroll.noPool")}</option>
            {(pools.data ?? []).map((p) => <option key={p.id} value={p.id}>{p.name}</option>)}
          </select>
          <FieldError errors={fields.pool} />
        </label>
        <label className="field">
          <span>{t("nodes.col.provider")}</span>
          <select value={provider} required onChange={(e) => setProvider(e.target.value)}>
            <option value="">{t("enroll.chooseProvider")}</option>
            {(providers.data ?? []).map((p) => <option key={p.id} value={p.id}>{p.name}</option>)}
          </select>
          <FieldError errors={fields.provider} />
        </label>
        <label className="field">
          <span>{t("nodes.col.deliveryForm")}</span>
          <select value={deliveryForm} onChange={(e) => setDeliveryForm(e.target.value as DeliveryForm)}>
            {DELIVERY_FORMS.map((form) => <option key={form} value={form}>{t(`deliveryForm.${form}`)}</option>)}
          </select>
          <FieldError errors={fields.delivery_form} />
        </label>
        <label className="field">
          <span>{t("nodes.col.billingMode")}</span>
          <select value={billingMode} onChange={(e) => setBillingMode(e.target.value as BillingMode)}>
            {BILLING_MODES.map((mode) => <option key={mode} value={mode}>{t(`billingMode.${mode}`)}</option>)}
          </select>
          <FieldError errors={fields.billing_mode} />
        </label>
        <label className="field">
          <span>{t("enroll.expiresHours")}</span>
          <input type="number" min={0} value={expiresHours} onChange={(e) => setExpiresHours(e.target.value)} />
          <FieldError errors={fields.expires_at} />
        </label>
        <label className="field">
          <span>{t("enroll.maxUses")}</span>
          <input type="number" min={1} value={maxUses} placeholder={t("enroll.unlimited")} onChange={(e) => setMaxUses(e.target.value)} />
          <FieldError errors={fields.max_uses} />
        </label>
        <div className="form-grid__actions">
          <button type="submit" className="btn btn--primary" disabled={create.isPending}>
            {create.isPending ? t("action.saving") : t("enroll.submit")}
          </button>
        </div>
        {create.isError ? (
          <div className="state state--error" role="alert">
            {create.error instanceof ApiError && create.error.isNotAvailable ? t("enroll.notAvailable") : (create.error as Error).message}
          </div>
        ) : null}
      </form>
      {create.data ? <CreatedToken token={create.data} /> : null}
    </Panel>
  );
}

function TokenList() {
  const { t } = useTranslation();
  const tokens = useEnrollmentTokens();
  const revoke = useRevokeEnrollmentToken();
  return (
    <Panel title={t("enroll.tokens")}>
      {revoke.isError ? <div className="state state--error" role="alert">{(revoke.error as Error).message}</div> : null}
      <QueryState query={tokens} what={t("enroll.tokens")} isEmpty={(d) => d.length === 0} empty={t("enroll.noTokens")}>
        {(list) => (
          <table className="table table--compact">
            <caption className="visually-hidden">{t("enroll.tokens")}</caption>
            <thead>
              <tr>
                <th scope="col">{t("enroll.name")}</th>
                <th scope="col">{t("enroll.prefix")}</th>
                <th scope="col">{t("enroll.uses")}</th>
                <th scope="col">{t("enroll.expires")}</th>
                <th scope="col">{t("rules.state")}</th>
                <th scope="col"><span className="visually-hidden">{t("enroll.actions")}</span></th>
              </tr>
            </thead>
            <tbody>
              {list.map((token) => {
                const usable = token.is_usable;
                return (
                  <tr key={token.id}>
                    <td>{token.name}</td>
                    <td><code>{token.prefix}…</code></td>
                    <td>{token.uses}{token.max_uses ? ` / ${token.max_uses}` : ""}</td>
                    <td>{token.expires_at ? formatDateTime(token.expires_at) : t("enroll.never")}</td>
                    <td>{token.revoked_at ? <Badge tone="muted">{t("enroll.revoked")}</Badge>
                      : usable ? <Badge tone="good">{t("enroll.usable")}</Badge> : <Badge tone="muted">{t("enroll.expired")}</Badge>}</td>
                    <td>
                      {token.revoked_at ? null : (
                        <button type="button" className="btn btn--small" disabled={revoke.isPending}
                          aria-label={t("enroll.revokeAria", { name: token.name })}
                          onClick={() => { if (window.confirm(t("enroll.revokeConfirm", { name: token.name }))) revoke.mutate(token.id); }}>
                          {t("enroll.revoke")}
                        </button>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        )}
      </QueryState>
    </Panel>
  );
}

export function EnrollPage() {
  const { t } = useTranslation();
  const canCreate = useHasRole("operator");
  return (
    <div className="page">
      <h1>{t("enroll.title")}</h1>
      <p className="muted">{t("enroll.intro")}</p>
      {canCreate ? (
        <>
          <CreateTokenForm />
          <TokenList />
        </>
      ) : (
        <p className="state state--empty" role="note">{t("enroll.viewerNote")}</p>
      )}
    </div>
  );
}
