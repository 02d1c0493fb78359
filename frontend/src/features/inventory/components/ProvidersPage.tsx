// Providers with their support contact (whom to call when the boundary says "provider"), and their sites.
// Operators add providers and sites and edit a provider's support contact in place.
import { useState, type FormEvent } from "react";
import { useTranslation } from "react-i18next";
import { ApiError } from "@/shared/api/client";
import { Can } from "@/shared/auth/Authorization";
import { Badge } from "@/shared/ui/Badge";
import { FieldError } from "@/shared/ui/FieldError";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import {
  useCreateProvider,
  useCreateSite,
  useProviders,
  useSites,
  useUpdateProvider,
  type Provider,
  type ProviderInput,
} from "../api/inventory";

const KINDS = ["cloud", "idc", "own"] as const;
const CLOUDS = ["aws", "gcp", "azure", "alibaba", "tencent", "oracle", "other"] as const;

function fieldsOf(error: unknown): Record<string, string[]> {
  return error instanceof ApiError ? error.fields : {};
}

function OtherError({ error, known }: { error: unknown; known: string[] }) {
  if (!error) return null;
  const fields = fieldsOf(error);
  const rest = Object.entries(fields).filter(([k]) => !known.includes(k)).flatMap(([, v]) => v);
  if (Object.keys(fields).length && !rest.length) return null;
  return <div className="state state--error" role="alert">{[error instanceof Error ? error.message : String(error), ...rest].join(" ")}</div>;
}

export function ProvidersPage() {
  const { t } = useTranslation();
  return (
    <div className="page" data-testid="providers-page">
      <h1>{t("providers.title")}</h1>
      <p className="muted">{t("providers.intro")}</p>
      <ProviderList />
      <Can role="operator"><CreateProvider /></Can>
      <SiteList />
    </div>
  );
}

function SupportContact({ provider }: { provider: Provider }) {
  const { t } = useTranslation();
  const update = useUpdateProvider();
  const [editing, setEditing] = useState(false);
  const [value, setValue] = useState(provider.support_contact ?? "");
  const fields = fieldsOf(update.error);
  const display = provider.support_contact ? provider.support_contact : <span className="muted">{t("providers.noContact")}</span>;
  if (!editing) {
    return (
      <>
        <span data-testid="support-contact">{display}</span>{" "}
        <Can role="operator">
          <button type="button" className="btn btn--small" aria-label={t("providers.editContactOf", { name: provider.name })}
            onClick={() => { setValue(provider.support_contact ?? ""); setEditing(true); }}>{t("providers.edit")}</button>
        </Can>
      </>
    );
  }
  return (
    <form className="inline-form" onSubmit={(e) => { e.preventDefault(); update.mutate({ id: provider.id, body: { support_contact: value.trim() } }, { onSuccess: () => setEditing(false) }); }}>
      <input value={value} maxLength={200} aria-label={t("providers.supportContactOf", { name: provider.name })}
        onChange={(e) => setValue(e.target.value)} aria-invalid={Boolean(fields.support_contact) || undefined} />
      <button type="submit" className="btn btn--small btn--primary" disabled={update.isPending}>{t("action.save")}</button>
      <button type="button" className="btn btn--small" onClick={() => { setEditing(false); update.reset(); }}>{t("action.cancel")}</button>
      <FieldError errors={fields.support_contact} />
      <OtherError error={update.error} known={["support_contact"]} />
    </form>
  );
}

function ProviderList() {
  const { t } = useTranslation();
  const providers = useProviders();
  return (
    <Panel title={t("providers.list")}>
      <QueryState query={providers} what={t("providers.list")} isEmpty={(d) => d.length === 0}>
        {(rows) => (
          <div className="table-wrap">
            <table className="table" data-testid="providers-table">
              <caption className="visually-hidden">{t("providers.list")}</caption>
              <thead><tr>
                <th scope="col">{t("providers.name")}</th><th scope="col">{t("providers.kind")}</th>
                <th scope="col">{t("providers.supportContact")}</th><th scope="col">{t("providers.notes")}</th>
              </tr></thead>
              <tbody>
                {rows.map((p) => (
                  <tr key={p.id} data-testid="provider-row">
                    <th scope="row">{p.name} <span className="muted small">{p.slug}</span></th>
                    <td><Badge tone="info">{t(`providers.kinds.${p.kind}`)}</Badge>{p.cloud ? ` ${p.cloud}` : ""}</td>
                    <td className="wrap"><SupportContact provider={p} /></td>
                    <td className="wrap">{p.notes || "—"}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </QueryState>
    </Panel>
  );
}

function CreateProvider() {
  const { t } = useTranslation();
  const create = useCreateProvider();
  const empty: ProviderInput = { name: "", slug: "", kind: "cloud", cloud: "", support_contact: "", notes: "" };
  const [form, setForm] = useState<ProviderInput>(empty);
  const fields = fieldsOf(create.error);
  const set = (changes: Partial<ProviderInput>) => setForm({ ...form, ...changes });
  const submit = (event: FormEvent) => { event.preventDefault(); create.mutate(form, { onSuccess: () => setForm(empty) }); };
  return (
    <Panel title={t("providers.create")}>
      <form className="form-grid" onSubmit={submit} aria-label={t("providers.create")} data-testid="provider-form">
        <label className="field"><span>{t("providers.name")}</span>
          <input value={form.name} required onChange={(e) => set({ name: e.target.value })} aria-invalid={Boolean(fields.name) || undefined} />
          <FieldError errors={fields.name} /></label>
        <label className="field"><span>{t("providers.slug")}</span>
          <input value={form.slug} required onChange={(e) => set({ slug: e.target.value })} aria-invalid={Boolean(fields.slug) || undefined} />
          <FieldError errors={fields.slug} /></label>
        <label className="field"><span>{t("providers.kind")}</span>
          <select value={form.kind} onChange={(e) => set({ kind: e.target.value as ProviderInput["kind"] })}>
            {KINDS.map((k) => <option key={k} value={k}>{t(`providers.kinds.${k}`)}</option>)}
          </select><FieldError errors={fields.kind} /></label>
        <label className="field"><span>{t("providers.cloud")}</span>
          <select value={form.cloud ?? ""} onChange={(e) => set({ cloud: e.target.value as ProviderInput["cloud"] })}>
            <option value="">—</option>
            {CLOUDS.map((c) => <option key={c} value={c}>{c}</option>)}
          </select><FieldError errors={fields.cloud} /></label>
        <label className="field"><span>{t("providers.supportContact")}</span>
          <input value={form.support_contact ?? ""} placeholder={t("providers.contactPlaceholder")} onChange={(e) => set({ support_contact: e.target.value })} />
          <FieldError errors={fields.support_contact} /></label>
        <div className="form-grid__actions">
          <button type="submit" className="btn btn--primary" disabled={create.isPending}>{t("providers.submit")}</button>
        </div>
        <OtherError error={create.error} known={["name", "slug", "kind", "cloud", "support_contact"]} />
      </form>
    </Panel>
  );
}

function SiteList() {
  const { t } = useTranslation();
  const sites = useSites();
  const providers = useProviders();
  const create = useCreateSite();
  const [name, setName] = useState("");
  const [provider, setProvider] = useState<number | "">("");
  const [region, setRegion] = useState("");
  const [country, setCountry] = useState("");
  const fields = fieldsOf(create.error);
  const providerName = (id?: number | null) => (providers.data ?? []).find((p) => p.id === id)?.name ?? "—";
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate({ name: name.trim(), provider: provider === "" ? null : provider, region_code: region.trim(), country: country.trim().toUpperCase() },
      { onSuccess: () => { setName(""); setRegion(""); setCountry(""); } });
  };
  return (
    <Panel title={t("sites.title")}>
      <QueryState query={sites} what={t("sites.title")} isEmpty={(d) => d.length === 0}>
        {(rows) => (
          <div className="table-wrap">
            <table className="table table--compact" data-testid="sites-table">
              <caption className="visually-hidden">{t("sites.title")}</caption>
              <thead><tr>
                <th scope="col">{t("sites.name")}</th><th scope="col">{t("sites.provider")}</th><th scope="col">{t("sites.region")}</th>
                <th scope="col">{t("sites.country")}</th><th scope="col">{t("sites.supportContact")}</th><th scope="col">{t("sites.icp")}</th>
              </tr></thead>
              <tbody>
                {rows.map((site) => (
                  <tr key={site.id}>
                    <th scope="row">{site.name}</th><td>{providerName(site.provider)}</td><td>{site.region_code || "—"}</td>
                    <td>{site.country}</td>
                    <td className="wrap">{(providers.data ?? []).find((p) => p.id === site.provider)?.support_contact || "—"}</td>
                    <td>{site.icp_filing_required ? <Badge tone="warn">{t("sites.icpRequired")}</Badge> : "—"}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </QueryState>
      <Can role="operator">
        <form className="form-grid" onSubmit={submit} aria-label={t("sites.create")} data-testid="site-form">
          <label className="field"><span>{t("sites.name")}</span>
            <input value={name} required onChange={(e) => setName(e.target.value)} aria-invalid={Boolean(fields.name) || undefined} />
            <FieldError errors={fields.name} /></label>
          <label className="field"><span>{t("sites.provider")}</span>
            <select value={provider} onChange={(e) => setProvider(e.target.value ? Number(e.target.value) : "")}>
              <option value="">—</option>
              {(providers.data ?? []).map((p) => <option key={p.id} value={p.id}>{p.name}</option>)}
            </select><FieldError errors={fields.provider} /></label>
          <label className="field"><span>{t("sites.region")}</span>
            <input value={region} onChange={(e) => setRegion(e.target.value)} /><FieldError errors={fields.region_code} /></label>
          <label className="field"><span>{t("sites.country")}</span>
            <input value={country} required maxLength={2} placeholder="US" onChange={(e) => setCountry(e.target.value)} aria-invalid={Boolean(fields.country) || undefined} />
            <FieldError errors={fields.country} /></label>
          <div className="form-grid__actions">
            <button type="submit" className="btn btn--primary" disabled={create.isPending}>{t("sites.submit")}</button>
          </div>
          <OtherError error={create.error} known={["name", "provider", "region_code", "country"]} />
        </form>
      </Can>
    </Panel>
  );
}
