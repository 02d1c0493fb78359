// Boundary overrides: who owns a layer for one provider (optionally one delivery form) or for one node, when the
// contract differs from the default matrix. The node page's boundary matrix shows them as "provider contract"
// or "node override". Operators add, edit and delete them (a delete asks first).
import { useRef, useState, type FormEvent } from "react";
import { useTranslation } from "react-i18next";
import type { DeliveryForm, Layer, Owner } from "@/shared/api/types";
import { Can } from "@/shared/auth/Authorization";
import { DELIVERY_FORMS, LAYERS_TOP_DOWN } from "@/shared/lib/domain";
import { integerOrAsTyped } from "@/shared/lib/params";
import { scrollIntoViewSoon } from "@/shared/lib/scroll";
import { ConfirmButton } from "@/shared/ui/ConfirmButton";
import { FieldError } from "@/shared/ui/FieldError";
import { FormError, fieldErrors } from "@/shared/ui/FormError";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import {
  useBoundaryOverrides, useCreateBoundaryOverride, useDeleteBoundaryOverride, useProviders, useUpdateBoundaryOverride,
  type BoundaryOverride,
} from "../api/inventory";

const OWNER_CHOICES: Owner[] = ["provider", "us", "hardware_vendor", "shared", "not_applicable"];

export function BoundaryOverridesPanel() {
  const { t } = useTranslation();
  const overrides = useBoundaryOverrides();
  const providers = useProviders();
  const remove = useDeleteBoundaryOverride();
  const [editing, setEditing] = useState<BoundaryOverride | null>(null);
  const formRef = useRef<HTMLDivElement>(null);
  const providerName = (id?: number | null) => (providers.data ?? []).find((p) => p.id === id)?.name ?? "—";
  const scopeOf = (row: BoundaryOverride) => (row.node ? t("overrides.nodeScope", { id: row.node })
    : `${providerName(row.provider)}${row.delivery_form ? ` · ${t(`deliveryForm.${row.delivery_form}`)}` : ""}`);
  return (
    <Panel title={t("overrides.boundary")} testId="boundary-overrides">
      <p className="small muted">{t("overrides.boundaryIntro")}</p>
      <QueryState query={overrides} what={t("overrides.boundary")} isEmpty={(d) => d.length === 0} empty={t("overrides.noBoundary")}>
        {(rows) => (
          <div className="table-wrap">
            <table className="table table--compact" data-testid="boundary-overrides-table">
              <caption className="visually-hidden">{t("overrides.boundary")}</caption>
              <thead><tr>
                <th scope="col">{t("overrides.scope")}</th><th scope="col">{t("overrides.layer")}</th><th scope="col">{t("overrides.owner")}</th>
                <th scope="col">{t("overrides.note")}</th><th scope="col"><span className="visually-hidden">{t("overrides.actions")}</span></th>
              </tr></thead>
              <tbody>
                {rows.map((row) => {
                  const what = { layer: t(`layer.${row.layer}`), scope: scopeOf(row) };
                  return (
                    <tr key={row.id} data-testid="boundary-override-row" className={row.id === editing?.id ? "row--editing" : undefined}>
                      <td>{scopeOf(row)}</td>
                      <td>{t(`layer.${row.layer}`)}</td>
                      <td>{t(`owner.${row.owner}`, { defaultValue: row.owner })}</td>
                      <td className="wrap">{row.note || "—"}</td>
                      <td>
                        <Can role="operator">
                          <div className="row-actions">
                            <button type="button" className="btn btn--small" aria-label={t("overrides.editAria", what)}
                              onClick={() => { setEditing(row); scrollIntoViewSoon(formRef); }}>{t("form.edit")}</button>
                            <ConfirmButton label={t("overrides.delete")} ariaLabel={t("overrides.deleteAria", what)}
                              warning={t("overrides.deleteBoundaryWarning")} pending={remove.isPending}
                              error={remove.variables === row.id ? remove.error : null}
                              onConfirm={() => remove.mutate(row.id, { onSuccess: () => { if (editing?.id === row.id) setEditing(null); } })} />
                          </div>
                        </Can>
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        )}
      </QueryState>
      <Can role="operator">
        <div ref={formRef}><BoundaryOverrideForm key={editing?.id ?? "new"} editing={editing} onDone={() => setEditing(null)} /></div>
      </Can>
    </Panel>
  );
}

/** Adds an override, or edits the one picked in the table (its scope, layer, owner and note). */
function BoundaryOverrideForm({ editing, onDone }: { editing: BoundaryOverride | null; onDone: () => void }) {
  const { t } = useTranslation();
  const providers = useProviders();
  const create = useCreateBoundaryOverride();
  const update = useUpdateBoundaryOverride();
  const write = editing ? update : create;
  const [scope, setScope] = useState<"provider" | "node">(editing?.node ? "node" : "provider");
  const [provider, setProvider] = useState<number | "">(editing?.provider ?? "");
  const [deliveryForm, setDeliveryForm] = useState<DeliveryForm | "">((editing?.delivery_form as DeliveryForm | "" | undefined) ?? "");
  const [node, setNode] = useState(editing?.node ? String(editing.node) : "");
  const [layer, setLayer] = useState<Layer>(editing?.layer ?? "hardware");
  const [owner, setOwner] = useState<Owner>(editing?.owner ?? "provider");
  const [note, setNote] = useState(editing?.note ?? "");
  const fields = fieldErrors(write.error);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const body = {
      provider: scope === "provider" && provider !== "" ? provider : null,
      delivery_form: scope === "provider" ? deliveryForm : "",
      node: scope === "node" ? integerOrAsTyped(node) : null,
      layer, owner, note: note.trim(),
    } as const;
    if (editing) update.mutate({ id: editing.id, body }, { onSuccess: onDone });
    else create.mutate(body, { onSuccess: () => setNote("") });
  };
  const title = editing ? t("overrides.editBoundary") : t("overrides.createBoundary");
  return (
    <form className="form-grid" onSubmit={submit} aria-label={title} data-testid="boundary-override-form">
      <h3 className="form-grid__title">{title}</h3>
      <label className="field"><span>{t("overrides.scope")}</span>
        <select value={scope} onChange={(e) => setScope(e.target.value as "provider" | "node")}>
          <option value="provider">{t("overrides.scopeProvider")}</option>
          <option value="node">{t("overrides.scopeNode")}</option>
        </select></label>
      {scope === "provider" ? (
        <>
          <label className="field"><span>{t("overrides.provider")}</span>
            <select value={provider} onChange={(e) => setProvider(e.target.value ? Number(e.target.value) : "")} aria-invalid={Boolean(fields.provider) || undefined}>
              <option value="">—</option>
              {(providers.data ?? []).map((p) => <option key={p.id} value={p.id}>{p.name}</option>)}
            </select><FieldError errors={fields.provider} /></label>
          <label className="field"><span>{t("overrides.deliveryForm")}</span>
            <select value={deliveryForm} onChange={(e) => setDeliveryForm(e.target.value as DeliveryForm | "")} aria-invalid={Boolean(fields.delivery_form) || undefined}>
              <option value="">{t("overrides.anyForm")}</option>
              {DELIVERY_FORMS.map((f) => <option key={f} value={f}>{t(`deliveryForm.${f}`)}</option>)}
            </select><FieldError errors={fields.delivery_form} /></label>
        </>
      ) : (
        <label className="field"><span>{t("overrides.nodeId")}</span>
          <input inputMode="numeric" value={node} onChange={(e) => setNode(e.target.value)} aria-invalid={Boolean(fields.node) || undefined} />
          <FieldError errors={fields.node} /></label>
      )}
      <label className="field"><span>{t("overrides.layer")}</span>
        <select value={layer} onChange={(e) => setLayer(e.target.value as Layer)} aria-invalid={Boolean(fields.layer) || undefined}>
          {LAYERS_TOP_DOWN.map((l) => <option key={l} value={l}>{t(`layer.${l}`)}</option>)}
        </select><FieldError errors={fields.layer} /></label>
      <label className="field"><span>{t("overrides.owner")}</span>
        <select value={owner} onChange={(e) => setOwner(e.target.value as Owner)} aria-invalid={Boolean(fields.owner) || undefined}>
          {OWNER_CHOICES.map((o) => <option key={o} value={o}>{t(`owner.${o}`, { defaultValue: o })}</option>)}
        </select><FieldError errors={fields.owner} /></label>
      <label className="field"><span>{t("overrides.note")}</span>
        <input value={note} onChange={(e) => setNote(e.target.value)} aria-invalid={Boolean(fields.note) || undefined} /><FieldError errors={fields.note} /></label>
      <div className="form-grid__actions">
        <button type="submit" className="btn btn--primary" disabled={write.isPending}>{editing ? t("form.saveChanges") : t("overrides.add")}</button>
        {editing ? <button type="button" className="btn" onClick={onDone}>{t("action.cancel")}</button> : null}
      </div>
      <FormError error={write.error} known={["provider", "delivery_form", "node", "layer", "owner", "note"]} />
    </form>
  );
}
