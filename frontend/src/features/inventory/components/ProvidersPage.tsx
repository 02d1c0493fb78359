// Providers with their support contact (whom to call when the boundary says "provider"), and their sites with
// their own contact (the provider's when a site has none). Operators add, edit and delete both (a delete asks
// first; one that nodes or pools still use is refused by the server and says so), and edit a provider's support
// contact in place.
import { useRef, useState, type FormEvent } from "react";
import { useTranslation } from "react-i18next";
import { Can } from "@/shared/auth/Authorization";
import { scrollIntoViewSoon } from "@/shared/lib/scroll";
import { Badge } from "@/shared/ui/Badge";
import { ConfirmButton } from "@/shared/ui/ConfirmButton";
import { FieldError } from "@/shared/ui/FieldError";
import { FormError, fieldErrors as fieldsOf } from "@/shared/ui/FormError";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import {
  useCreateProvider,
  useCreateSite,
  useDeleteProvider,
  useDeleteSite,
  useProviders,
  useSites,
  useUpdateProvider,
  useUpdateSite,
  type Provider,
  type ProviderInput,
  type Site,
  type SiteInput,
} from "../api/inventory";

const KINDS = ["cloud", "idc", "own"] as const;
const CLOUDS = ["aws", "gcp", "azure", "alibaba", "tencent", "oracle", "other"] as const;

export function ProvidersPage() {
  const { t } = useTranslation();
  const [editingProvider, setEditingProvider] = useState<Provider | null>(null);
  const providerForm = useRef<HTMLDivElement>(null);
  const editProvider = (provider: Provider) => { setEditingProvider(provider); scrollIntoViewSoon(providerForm); };
  return (
    <div className="page" data-testid="providers-page">
      <h1>{t("providers.title")}</h1>
      <p className="muted">{t("providers.intro")}</p>
      <ProviderList editingId={editingProvider?.id} onEdit={editProvider} />
      <Can role="operator">
        <div ref={providerForm}>
          <ProviderForm key={editingProvider?.id ?? "new"} editing={editingProvider} onDone={() => setEditingProvider(null)} />
        </div>
      </Can>
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
      <FormError error={update.error} known={["support_contact"]} />
    </form>
  );
}

function ProviderList({ editingId, onEdit }: { editingId?: number; onEdit: (provider: Provider) => void }) {
  const { t } = useTranslation();
  const providers = useProviders();
  const remove = useDeleteProvider();
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
                <th scope="col"><span className="visually-hidden">{t("overrides.actions")}</span></th>
              </tr></thead>
              <tbody>
                {rows.map((p) => (
                  <tr key={p.id} data-testid="provider-row" className={p.id === editingId ? "row--editing" : undefined}>
                    <th scope="row">{p.name} <span className="muted small">{p.slug}</span></th>
                    <td><Badge tone="info">{t(`providers.kinds.${p.kind}`)}</Badge>{p.cloud ? ` ${p.cloud}` : ""}</td>
                    <td className="wrap"><SupportContact provider={p} /></td>
                    <td className="wrap">{p.notes || "—"}</td>
                    <td>
                      <Can role="operator">
                        <div className="row-actions">
                          <button type="button" className="btn btn--small" onClick={() => onEdit(p)}
                            aria-label={t("providers.editAria", { name: p.name })}>{t("form.edit")}</button>
                          <ConfirmButton label={t("form.delete")} ariaLabel={t("providers.deleteAria", { name: p.name })}
                            warning={t("providers.deleteWarning")} pending={remove.isPending}
                            error={remove.variables === p.id ? remove.error : null} onConfirm={() => remove.mutate(p.id)} />
                        </div>
                      </Can>
                    </td>
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

function providerInput(provider: Provider | null): ProviderInput {
  if (!provider) return { name: "", slug: "", kind: "cloud", cloud: "", support_contact: "", notes: "" };
  return { name: provider.name, slug: provider.slug, kind: provider.kind, cloud: provider.cloud ?? "",
    support_contact: provider.support_contact ?? "", notes: provider.notes ?? "" };
}

/** Adds a provider, or edits the one picked in the list (the same fields and checks). */
function ProviderForm({ editing, onDone }: { editing: Provider | null; onDone: () => void }) {
  const { t } = useTranslation();
  const create = useCreateProvider();
  const update = useUpdateProvider();
  const write = editing ? update : create;
  const [form, setForm] = useState<ProviderInput>(() => providerInput(editing));
  const fields = fieldsOf(write.error);
  const set = (changes: Partial<ProviderInput>) => setForm({ ...form, ...changes });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const body = { ...form, name: form.name.trim(), slug: form.slug.trim(), cloud: form.kind === "cloud" ? form.cloud : "" };
    if (editing) update.mutate({ id: editing.id, body }, { onSuccess: onDone });
    else create.mutate(body, { onSuccess: () => setForm(providerInput(null)) });
  };
  const title = editing ? t("providers.editTitle", { name: editing.name }) : t("providers.create");
  return (
    <Panel title={title}>
      <form className="form-grid" onSubmit={submit} aria-label={title} data-testid="provider-form">
        <label className="field"><span>{t("providers.name")}</span>
          <input value={form.name} required maxLength={100} onChange={(e) => set({ name: e.target.value })} aria-invalid={Boolean(fields.name) || undefined} />
          <FieldError errors={fields.name} /></label>
        <label className="field"><span>{t("providers.slug")}</span>
          <input value={form.slug} required maxLength={50} onChange={(e) => set({ slug: e.target.value })} aria-invalid={Boolean(fields.slug) || undefined} />
          <FieldError errors={fields.slug} /></label>
        <label className="field"><span>{t("providers.kind")}</span>
          <select value={form.kind} onChange={(e) => set({ kind: e.target.value as ProviderInput["kind"] })}>
            {KINDS.map((k) => <option key={k} value={k}>{t(`providers.kinds.${k}`)}</option>)}
          </select><FieldError errors={fields.kind} /></label>
        <label className="field"><span>{t("providers.cloud")}</span>
          <select value={form.kind === "cloud" ? form.cloud ?? "" : ""} disabled={form.kind !== "cloud"}
            onChange={(e) => set({ cloud: e.target.value as ProviderInput["cloud"] })} aria-invalid={Boolean(fields.cloud) || undefined}>
            <option value="">—</option>
            {CLOUDS.map((c) => <option key={c} value={c}>{c}</option>)}
          </select><FieldError errors={fields.cloud} /></label>
        <label className="field"><span>{t("providers.supportContact")}</span>
          <input value={form.support_contact ?? ""} maxLength={200} placeholder={t("providers.contactPlaceholder")} onChange={(e) => set({ support_contact: e.target.value })}
            aria-invalid={Boolean(fields.support_contact) || undefined} />
          <FieldError errors={fields.support_contact} /></label>
        <label className="field"><span>{t("providers.notes")}</span>
          <input value={form.notes ?? ""} onChange={(e) => set({ notes: e.target.value })} />
          <FieldError errors={fields.notes} /></label>
        <div className="form-grid__actions">
          <button type="submit" className="btn btn--primary" disabled={write.isPending}>{editing ? t("form.saveChanges") : t("providers.submit")}</button>
          {editing ? <button type="button" className="btn" onClick={onDone}>{t("action.cancel")}</button> : null}
        </div>
        <FormError error={write.error} known={["name", "slug", "kind", "cloud", "support_contact", "notes"]} />
      </form>
    </Panel>
  );
}

function SiteList() {
  const { t } = useTranslation();
  const sites = useSites();
  const providers = useProviders();
  const remove = useDeleteSite();
  const [editing, setEditing] = useState<Site | null>(null);
  const formRef = useRef<HTMLDivElement>(null);
  const providerName = (id?: number | null) => (providers.data ?? []).find((p) => p.id === id)?.name ?? "—";
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
                <th scope="col"><span className="visually-hidden">{t("overrides.actions")}</span></th>
              </tr></thead>
              <tbody>
                {rows.map((site) => (
                  <tr key={site.id} data-testid="site-row" className={site.id === editing?.id ? "row--editing" : undefined}>
                    <th scope="row">{site.name}</th><td>{providerName(site.provider)}</td><td>{site.region_code || "—"}</td>
                    <td>{site.country}</td>
                    <td className="wrap" data-testid="site-contact">
                      {site.support_contact
                        ? site.support_contact
                        : site.provider_support_contact
                          ? <span className="muted">{t("sites.providersContact", { contact: site.provider_support_contact })}</span>
                          : "—"}
                    </td>
                    <td>{site.icp_filing_required ? <Badge tone="warn">{t("sites.icpRequired")}</Badge> : "—"}</td>
                    <td>
                      <Can role="operator">
                        <div className="row-actions">
                          <button type="button" className="btn btn--small" aria-label={t("sites.editAria", { name: site.name })}
                            onClick={() => { setEditing(site); scrollIntoViewSoon(formRef); }}>{t("form.edit")}</button>
                          <ConfirmButton label={t("form.delete")} ariaLabel={t("sites.deleteAria", { name: site.name })}
                            warning={t("sites.deleteWarning")} pending={remove.isPending}
                            error={remove.variables === site.id ? remove.error : null} onConfirm={() => remove.mutate(site.id)} />
                        </div>
                      </Can>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </QueryState>
      <Can role="operator">
        <div ref={formRef}>
          <SiteForm key={editing?.id ?? "new"} editing={editing} onDone={() => setEditing(null)} />
        </div>
      </Can>
    </Panel>
  );
}

function siteInput(site: Site | null): SiteInput {
  if (!site) return { name: "", provider: null, region_code: "", country: "", support_contact: "" };
  return { name: site.name, provider: site.provider ?? null, region_code: site.region_code ?? "", country: site.country,
    support_contact: site.support_contact ?? "" };
}

/** Adds a site, or edits the one picked in the list. */
function SiteForm({ editing, onDone }: { editing: Site | null; onDone: () => void }) {
  const { t } = useTranslation();
  const providers = useProviders();
  const create = useCreateSite();
  const update = useUpdateSite();
  const write = editing ? update : create;
  const [form, setForm] = useState<SiteInput>(() => siteInput(editing));
  const set = (changes: Partial<SiteInput>) => setForm({ ...form, ...changes });
  const fields = fieldsOf(write.error);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const body: SiteInput = { name: form.name.trim(), provider: form.provider ?? null, region_code: (form.region_code ?? "").trim(),
      country: form.country.trim().toUpperCase(), support_contact: (form.support_contact ?? "").trim() };
    if (editing) update.mutate({ id: editing.id, body }, { onSuccess: onDone });
    else create.mutate(body, { onSuccess: () => setForm(siteInput(null)) });
  };
  const title = editing ? t("sites.editTitle", { name: editing.name }) : t("sites.create");
  return (
    <form className="form-grid" onSubmit={submit} aria-label={title} data-testid="site-form">
      <h3 className="form-grid__title">{title}</h3>
      <label className="field"><span>{t("sites.name")}</span>
        <input value={form.name} required maxLength={100} onChange={(e) => set({ name: e.target.value })} aria-invalid={Boolean(fields.name) || undefined} />
        <FieldError errors={fields.name} /></label>
      <label className="field"><span>{t("sites.provider")}</span>
        <select value={form.provider ?? ""} onChange={(e) => set({ provider: e.target.value ? Number(e.target.value) : null })} aria-invalid={Boolean(fields.provider) || undefined}>
          <option value="">—</option>
          {(providers.data ?? []).map((p) => <option key={p.id} value={p.id}>{p.name}</option>)}
        </select><FieldError errors={fields.provider} /></label>
      <label className="field"><span>{t("sites.region")}</span>
        <input value={form.region_code ?? ""} maxLength={64} onChange={(e) => set({ region_code: e.target.value })} aria-invalid={Boolean(fields.region_code) || undefined} />
        <FieldError errors={fields.region_code} /></label>
      <label className="field"><span>{t("sites.country")}</span>
        <input value={form.country} required maxLength={2} placeholder="US" onChange={(e) => set({ country: e.target.value })} aria-invalid={Boolean(fields.country) || undefined} />
        <FieldError errors={fields.country} /></label>
      <label className="field"><span>{t("sites.ownContact")}</span>
        <input value={form.support_contact ?? ""} maxLength={200} placeholder={t("sites.contactPlaceholder")} onChange={(e) => set({ support_contact: e.target.value })}
          aria-invalid={Boolean(fields.support_contact) || undefined} />
        <FieldError errors={fields.support_contact} /></label>
      <div className="form-grid__actions">
        <button type="submit" className="btn btn--primary" disabled={write.isPending}>{editing ? t("form.saveChanges") : t("sites.submit")}</button>
        {editing ? <button type="button" className="btn" onClick={onDone}>{t("action.cancel")}</button> : null}
      </div>
      <FormError error={write.error} known={["name", "provider", "region_code", "country", "support_contact"]} />
    </form>
  );
}
