// Baselines: the software stack and GPU shape a pool (or one node) should have; the node page's stack panel
// shows drift against them. Operators add and delete them.
import { useState, type FormEvent } from "react";
import { useTranslation } from "react-i18next";
import { ApiError } from "@/shared/api/client";
import { Can } from "@/shared/auth/Authorization";
import { formatBytes, formatDateTime } from "@/shared/lib/format";
import { FieldError } from "@/shared/ui/FieldError";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import { useBaselines, useCreateBaseline, useDeleteBaseline, useInventoryPools, type Baseline } from "../api/inventory";

function DeleteBaseline({ baseline }: { baseline: Baseline }) {
  const { t } = useTranslation();
  const remove = useDeleteBaseline();
  const [confirming, setConfirming] = useState(false);
  if (!confirming) return <button type="button" className="btn btn--small" onClick={() => setConfirming(true)} aria-label={t("baselines.deleteAria", { name: baseline.name })}>{t("baselines.delete")}</button>;
  return (
    <span role="group" aria-label={t("baselines.deleteAria", { name: baseline.name })}>
      <button type="button" className="btn btn--small btn--primary" disabled={remove.isPending} onClick={() => remove.mutate(baseline.id)}>{t("baselines.deleteYes")}</button>{" "}
      <button type="button" className="btn btn--small" onClick={() => setConfirming(false)}>{t("action.cancel")}</button>
      {remove.isError ? <span className="field__error" role="alert">{(remove.error as Error).message}</span> : null}
    </span>
  );
}

export function BaselinesPage() {
  const { t } = useTranslation();
  const baselines = useBaselines();
  const pools = useInventoryPools();
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
                    <tr key={b.id} data-testid="baseline-row">
                      <th scope="row">{b.name}</th>
                      <td>{b.node ? t("overrides.nodeScope", { id: b.node }) : b.pool ? t("baselines.poolScope", { name: poolName(b.pool) ?? b.pool }) : t("baselines.fleet")}</td>
                      <td>{b.driver_version || "—"}</td>
                      <td>{b.cuda_driver_version || "—"}</td>
                      <td className="wrap">{[b.os, b.kernel].filter(Boolean).join(" · ") || "—"}</td>
                      <td className="wrap">{[b.gpu_count ? `${b.gpu_count} ×` : "", b.gpu_model, b.gpu_memory_bytes ? formatBytes(b.gpu_memory_bytes) : ""].filter(Boolean).join(" ") || "—"}</td>
                      <td>{formatDateTime(b.updated_at)}</td>
                      <td><Can role="operator"><DeleteBaseline baseline={b} /></Can></td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </QueryState>
      </Panel>
      <Can role="operator"><CreateBaseline /></Can>
    </div>
  );
}

function CreateBaseline() {
  const { t } = useTranslation();
  const pools = useInventoryPools();
  const create = useCreateBaseline();
  const [name, setName] = useState("");
  const [pool, setPool] = useState<number | "">("");
  const [driver, setDriver] = useState("");
  const [cuda, setCuda] = useState("");
  const [gpuModel, setGpuModel] = useState("");
  const [gpuCount, setGpuCount] = useState("");
  const fields = create.error instanceof ApiError ? create.error.fields : {};
  const known = ["name", "pool", "driver_version", "cuda_driver_version", "gpu_model", "gpu_count"];
  const other = Object.entries(fields).filter(([k]) => !known.includes(k)).flatMap(([, v]) => v);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate({
      name: name.trim(), pool: pool === "" ? null : pool, driver_version: driver.trim(), cuda_driver_version: cuda.trim(),
      gpu_model: gpuModel.trim(), gpu_count: gpuCount.trim() ? Number(gpuCount) : null,
    }, { onSuccess: () => { setName(""); setDriver(""); setCuda(""); setGpuModel(""); setGpuCount(""); } });
  };
  return (
    <Panel title={t("baselines.create")}>
      <form className="form-grid" onSubmit={submit} aria-label={t("baselines.create")} data-testid="baseline-form">
        <label className="field"><span>{t("baselines.name")}</span>
          <input value={name} required onChange={(e) => setName(e.target.value)} aria-invalid={Boolean(fields.name) || undefined} />
          <FieldError errors={fields.name} /></label>
        <label className="field"><span>{t("baselines.pool")}</span>
          <select value={pool} onChange={(e) => setPool(e.target.value ? Number(e.target.value) : "")}>
            <option value="">{t("baselines.fleet")}</option>
            {(pools.data ?? []).map((p) => <option key={p.id} value={p.id}>{p.name}</option>)}
          </select><FieldError errors={fields.pool} /></label>
        <label className="field"><span>{t("baselines.driver")}</span>
          <input value={driver} placeholder="550.54.15" onChange={(e) => setDriver(e.target.value)} aria-invalid={Boolean(fields.driver_version) || undefined} />
          <FieldError errors={fields.driver_version} /></label>
        <label className="field"><span>{t("baselines.cuda")}</span>
          <input value={cuda} placeholder="12.4" onChange={(e) => setCuda(e.target.value)} aria-invalid={Boolean(fields.cuda_driver_version) || undefined} />
          <FieldError errors={fields.cuda_driver_version} /></label>
        <label className="field"><span>{t("baselines.gpuModel")}</span>
          <input value={gpuModel} onChange={(e) => setGpuModel(e.target.value)} /><FieldError errors={fields.gpu_model} /></label>
        <label className="field"><span>{t("baselines.gpuCount")}</span>
          <input inputMode="numeric" value={gpuCount} onChange={(e) => setGpuCount(e.target.value)} aria-invalid={Boolean(fields.gpu_count) || undefined} />
          <FieldError errors={fields.gpu_count} /></label>
        <div className="form-grid__actions">
          <button type="submit" className="btn btn--primary" disabled={create.isPending}>{t("baselines.submit")}</button>
        </div>
        {create.isError && (other.length || !Object.keys(fields).length)
          ? <div className="state state--error" role="alert">{[(create.error as Error).message, ...other].join(" ")}</div> : null}
      </form>
    </Panel>
  );
}
