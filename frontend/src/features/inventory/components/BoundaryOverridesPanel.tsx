// Boundary overrides: who owns a layer for one provider (optionally one delivery form) or for one node, when the
// contract differs from the default matrix. The node page's boundary matrix shows them as "provider contract"
// or "node override". Operators add and delete them.
import { useState, type FormEvent } from "react";
import { useTranslation } from "react-i18next";
import { ApiError } from "@/shared/api/client";
import type { DeliveryForm, Layer, Owner } from "@/shared/api/types";
import { Can } from "@/shared/auth/Authorization";
import { DELIVERY_FORMS, LAYERS_TOP_DOWN } from "@/shared/lib/domain";
import { FieldError } from "@/shared/ui/FieldError";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import { useBoundaryOverrides, useCreateBoundaryOverride, useDeleteBoundaryOverride, useProviders } from "../api/inventory";

const OWNER_CHOICES: Owner[] = ["provider", "us", "hardware_vendor", "shared", "not_applicable"];

export function BoundaryOverridesPanel() {
  const { t } = useTranslation();
  const overrides = useBoundaryOverrides();
  const providers = useProviders();
  const remove = useDeleteBoundaryOverride();
  const providerName = (id?: number | null) => (providers.data ?? []).find((p) => p.id === id)?.name ?? "—";
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
                {rows.map((row) => (
                  <tr key={row.id} data-testid="boundary-override-row">
                    <td>{row.node ? t("overrides.nodeScope", { id: row.node }) : `${providerName(row.provider)}${row.delivery_form ? ` · ${t(`deliveryForm.${row.delivery_form}`)}` : ""}`}</td>
                    <td>{t(`layer.${row.layer}`)}</td>
                    <td>{t(`owner.${row.owner}`, { defaultValue: row.owner })}</td>
                    <td className="wrap">{row.note || "—"}</td>
                    <td>
                      <Can role="operator">
                        <button type="button" className="btn btn--small" disabled={remove.isPending}
                          aria-label={t("overrides.deleteAria", { layer: t(`layer.${row.layer}`) })}
                          onClick={() => remove.mutate(row.id)}>{t("overrides.delete")}</button>
                      </Can>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </QueryState>
      {remove.isError ? <div className="state state--error" role="alert">{(remove.error as Error).message}</div> : null}
      <Can role="operator"><CreateBoundaryOverride /></Can>
    </Panel>
  );
}

function CreateBoundaryOverride() {
  const { t } = useTranslation();
  const providers = useProviders();
  const create = useCreateBoundaryOverride();
  const [scope, setScope] = useState<"provider" | "node">("provider");
  const [provider, setProvider] = useState<number | "">("");
  const [deliveryForm, setDeliveryForm] = useState<DeliveryForm | "">("");
  const [node, setNode] = useState("");
  const [layer, setLayer] = useState<Layer>("hardware");
  const [owner, setOwner] = useState<Owner>("provider");
  const [note, setNote] = useState("");
  const fields = create.error instanceof ApiError ? create.error.fields : {};
  const known = ["provider", "delivery_form", "node", "layer", "owner", "note"];
  const other = Object.entries(fields).filter(([k]) => !known.includes(k)).flatMap(([, v]) => v);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate({
      provider: scope === "provider" && provider !== "" ? provider : null,
      delivery_form: scope === "provider" ? deliveryForm : "",
      node: scope === "node" && node.trim() ? Number(node) : null,
      layer, owner, note: note.trim(),
    }, { onSuccess: () => setNote("") });
  };
  return (
    <form className="form-grid" onSubmit={submit} aria-label={t("overrides.createBoundary")} data-testid="boundary-override-form">
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
            <select value={deliveryForm} onChange={(e) => setDeliveryForm(e.target.value as DeliveryForm | "")}>
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
        <select value={layer} onChange={(e) => setLayer(e.target.value as Layer)}>
          {LAYERS_TOP_DOWN.map((l) => <option key={l} value={l}>{t(`layer.${l}`)}</option>)}
        </select><FieldError errors={fields.layer} /></label>
      <label className="field"><span>{t("overrides.owner")}</span>
        <select value={owner} onChange={(e) => setOwner(e.target.value as Owner)}>
          {OWNER_CHOICES.map((o) => <option key={o} value={o}>{t(`owner.${o}`, { defaultValue: o })}</option>)}
        </select><FieldError errors={fields.owner} /></label>
      <label className="field"><span>{t("overrides.note")}</span>
        <input value={note} onChange={(e) => setNote(e.target.value)} /><FieldError errors={fields.note} /></label>
      <div className="form-grid__actions">
        <button type="submit" className="btn btn--primary" disabled={create.isPending}>{t("overrides.add")}</button>
      </div>
      {create.isError && (other.length || !Object.keys(fields).length)
        ? <div className="state state--error" role="alert">{[(create.error as Error).message, ...other].join(" ")}</div> : null}
    </form>
  );
}
