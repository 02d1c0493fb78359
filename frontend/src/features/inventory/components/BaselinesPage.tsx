// Baselines: the software stack and GPU shape a pool (or one node) should have; the node page's stack panel
// shows drift against them. Operators add, edit and delete them (a delete asks first). The form covers the
// fields people pin by hand; frameworks, CUDA toolkits and fabric pins stay as the API or the admin set them.
import { useRef, useState, type FormEvent } from "react";
import { useTranslation } from "react-i18next";
import { Can } from "@/shared/auth/Authorization";
import { formatBytes, formatDateTime } from "@/shared/lib/format";
import { integerOrAsTyped } from "@/shared/lib/params";
import { scrollIntoViewSoon } from "@/shared/lib/scroll";
import { ConfirmButton } from "@/shared/ui/ConfirmButton";
import { FieldError } from "@/shared/ui/FieldError";
import { FormError, fieldErrors } from "@/shared/ui/FormError";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import {
  useBaselines, useCreateBaseline, useDeleteBaseline, useInventoryPools, useUpdateBaseline, type Baseline,
} from "../api/inventory";

export function BaselinesPage() {
  const { t } = useTranslation();
  const baselines = useBaselines();
  const pools = useInventoryPools();
  const remove = useDeleteBaseline();
  const [editing, setEditing] = useState<Baseline | null>(null);
  const formRef = useRef<HTMLDivElement>(null);
  const poolName = (id?: number | null) => (pools.data ?? []).find((p) => p.id === id)?.name;
  return (
    <div className="page" data-testid="baselines-page">
      <h1>{t("baselines.title")}</h1>
      <p className="muted">{t("baselines.intro")}</p>
      <Panel title={t("baselines.list")}>
        <QueryState query={baselines} what={t("baselines.title")} isEmpty={(d) => d.length === 0} empty={t("baselines.none")}>
          {(rows) => (
            <div className="table-wrap">
              <table className="table table--compact" data-testid="baselines-table">
                <caption className="visually-hidden">{t("baselines.list")}</caption>
                <thead><tr>
                  <th scope="col">{t("baselines.name")}</th><th scope="col">{t("baselines.scope")}</th><th scope="col">{t("baselines.driver")}</th>
                  <th scope="col">{t("baselines.cuda")}</th><th scope="col">{t("baselines.os")}</th><th scope="col">{t("baselines.gpu")}</th>
                  <th scope="col">{t("baselines.updated")}</th><th scope="col"><span className="visually-hidden">{t("overrides.actions")}</span></th>
                </tr></thead>
                <tbody>
                  {rows.map((b) => (
                    <tr key={b.id} data-testid="baseline-row" className={b.id === editing?.id ? "row--editing" : undefined}>
                      <th scope="row">{b.name}</th>
                      <td>{b.node ? t("overrides.nodeScope", { id: b.node }) : b.pool ? t("baselines.poolScope", { name: poolName(b.pool) ?? b.pool }) : t("baselines.fleet")}</td>
                      <td>{b.driver_version || "—"}</td>
                      <td>{b.cuda_driver_version || "—"}</td>
                      <td className="wrap">{[b.os, b.kernel].filter(Boolean).join(" · ") || "—"}</td>
                      <td className="wrap">{[b.gpu_count ? `${b.gpu_count} ×` : "", b.gpu_model, b.gpu_memory_bytes ? formatBytes(b.gpu_memory_bytes) : ""].filter(Boolean).join(" ") || "—"}</td>
                      <td>{formatDateTime(b.updated_at)}</td>
                      <td>
                        <Can role="operator">
                          <div className="row-actions">
                            <button type="button" className="btn btn--small" aria-label={t("baselines.editAria", { name: b.name })}
                              onClick={() => { setEditing(b); scrollIntoViewSoon(formRef); }}>{t("form.edit")}</button>
                            <ConfirmButton label={t("baselines.delete")} ariaLabel={t("baselines.deleteAria", { name: b.name })}
                              warning={t("baselines.deleteWarning")} confirmLabel={t("baselines.deleteYes")} pending={remove.isPending}
                              error={remove.variables === b.id ? remove.error : null}
                              onConfirm={() => remove.mutate(b.id, { onSuccess: () => { if (editing?.id === b.id) setEditing(null); } })} />
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
      <Can role="operator">
        <div ref={formRef}><BaselineForm key={editing?.id ?? "new"} editing={editing} onDone={() => setEditing(null)} /></div>
      </Can>
    </div>
  );
}

interface BaselineFormState {
  name: string; scope: "pool" | "node"; pool: string; node: string; driver: string; cuda: string; os: string;
  kernel: string; gpuModel: string; gpuCount: string;
}

function initial(b: Baseline | null): BaselineFormState {
  return {
    name: b?.name ?? "", scope: b?.node ? "node" : "pool", pool: b?.pool ? String(b.pool) : "", node: b?.node ? String(b.node) : "",
    driver: b?.driver_version ?? "", cuda: b?.cuda_driver_version ?? "", os: b?.os ?? "", kernel: b?.kernel ?? "",
    gpuModel: b?.gpu_model ?? "", gpuCount: b?.gpu_count != null ? String(b.gpu_count) : "",
  };
}

const FIELDS = ["name", "pool", "node", "driver_version", "cuda_driver_version", "os", "kernel", "gpu_model", "gpu_count"];

/** Adds a baseline, or edits the one picked in the list. The server checks everything (one of pool or node,
 * one baseline per pool or node, a whole number of GPUs) and its errors show beside the fields. */
function BaselineForm({ editing, onDone }: { editing: Baseline | null; onDone: () => void }) {
  const { t } = useTranslation();
  const pools = useInventoryPools();
  const create = useCreateBaseline();
  const update = useUpdateBaseline();
  const write = editing ? update : create;
  const [form, setForm] = useState<BaselineFormState>(() => initial(editing));
  const set = (changes: Partial<BaselineFormState>) => setForm({ ...form, ...changes });
  const fields = fieldErrors(write.error);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const body = {
      name: form.name.trim(), pool: form.scope === "pool" ? integerOrAsTyped(form.pool) : null, node: form.scope === "node" ? integerOrAsTyped(form.node) : null,
      driver_version: form.driver.trim(), cuda_driver_version: form.cuda.trim(), os: form.os.trim(), kernel: form.kernel.trim(),
      gpu_model: form.gpuModel.trim(), gpu_count: integerOrAsTyped(form.gpuCount),
    };
    if (editing) update.mutate({ id: editing.id, body }, { onSuccess: onDone });
    else create.mutate(body, { onSuccess: () => setForm(initial(null)) });
  };
  const title = editing ? t("baselines.editTitle", { name: editing.name }) : t("baselines.create");
  const invalid = (name: string) => Boolean(fields[name]) || undefined;
  return (
    <Panel title={title}>
      <form className="form-grid" onSubmit={submit} aria-label={title} data-testid="baseline-form">
        <label className="field"><span>{t("baselines.name")}</span>
          <input value={form.name} required maxLength={100} onChange={(e) => set({ name: e.target.value })} aria-invalid={invalid("name")} />
          <FieldError errors={fields.name} /></label>
        <label className="field"><span>{t("baselines.appliesTo")}</span>
          <select value={form.scope} onChange={(e) => set({ scope: e.target.value as "pool" | "node" })}>
            <option value="pool">{t("baselines.aPool")}</option>
            <option value="node">{t("baselines.oneNode")}</option>
          </select></label>
        {form.scope === "pool" ? (
          <label className="field"><span>{t("baselines.pool")}</span>
            <select value={form.pool} onChange={(e) => set({ pool: e.target.value })} aria-invalid={invalid("pool")}>
              <option value="">{t("overrides.choosePool")}</option>
              {(pools.data ?? []).map((p) => <option key={p.id} value={p.id}>{p.name}</option>)}
            </select><FieldError errors={fields.pool} /></label>
        ) : (
          <label className="field"><span>{t("overrides.nodeId")}</span>
            <input inputMode="numeric" value={form.node} onChange={(e) => set({ node: e.target.value })} aria-invalid={invalid("node")} />
            <FieldError errors={fields.node} /></label>
        )}
        <label className="field"><span>{t("baselines.driver")}</span>
          <input value={form.driver} placeholder="550.54.15" onChange={(e) => set({ driver: e.target.value })} aria-invalid={invalid("driver_version")} />
          <FieldError errors={fields.driver_version} /></label>
        <label className="field"><span>{t("baselines.cuda")}</span>
          <input value={form.cuda} placeholder="12.4" onChange={(e) => set({ cuda: e.target.value })} aria-invalid={invalid("cuda_driver_version")} />
          <FieldError errors={fields.cuda_driver_version} /></label>
        <label className="field"><span>{t("baselines.osName")}</span>
          <input value={form.os} placeholder="Ubuntu 22.04.4 LTS" onChange={(e) => set({ os: e.target.value })} aria-invalid={invalid("os")} />
          <FieldError errors={fields.os} /></label>
        <label className="field"><span>{t("baselines.kernel")}</span>
          <input value={form.kernel} onChange={(e) => set({ kernel: e.target.value })} aria-invalid={invalid("kernel")} />
          <FieldError errors={fields.kernel} /></label>
        <label className="field"><span>{t("baselines.gpuModel")}</span>
          <input value={form.gpuModel} onChange={(e) => set({ gpuModel: e.target.value })} aria-invalid={invalid("gpu_model")} />
          <FieldError errors={fields.gpu_model} /></label>
        <label className="field"><span>{t("baselines.gpuCount")}</span>
          <input inputMode="numeric" value={form.gpuCount} onChange={(e) => set({ gpuCount: e.target.value })} aria-invalid={invalid("gpu_count")} />
          <FieldError errors={fields.gpu_count} /></label>
        <div className="form-grid__actions">
          <button type="submit" className="btn btn--primary" disabled={write.isPending}>{editing ? t("form.saveChanges") : t("baselines.submit")}</button>
          {editing ? <button type="button" className="btn" onClick={onDone}>{t("action.cancel")}</button> : null}
        </div>
        <FormError error={write.error} known={FIELDS} />
      </form>
    </Panel>
  );
}
