// Per-pool rule overrides: a rule's parameters, hold time or on/off for one pool (the catalog's values
// elsewhere). Operators add, edit and delete them (a delete asks first); the server checks the parameters against
// the rule's bounds and its messages appear next to the field.
import { useRef, useState, type FormEvent } from "react";
import { useTranslation } from "react-i18next";
import { Can } from "@/shared/auth/Authorization";
import { formatDateTime, formatValue } from "@/shared/lib/format";
import { integerOrAsTyped } from "@/shared/lib/params";
import { scrollIntoViewSoon } from "@/shared/lib/scroll";
import { ConfirmButton } from "@/shared/ui/ConfirmButton";
import { FieldError } from "@/shared/ui/FieldError";
import { FormError, fieldErrors } from "@/shared/ui/FormError";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import { useRules } from "../api/rules";
import {
  useCreateRuleOverride, useDeleteRuleOverride, usePoolChoices, useRuleOverrides, useUpdateRuleOverride, type RuleOverride,
} from "../api/ruleOverrides";

export function RuleOverridesPanel() {
  const { t } = useTranslation();
  const overrides = useRuleOverrides();
  const pools = usePoolChoices();
  const remove = useDeleteRuleOverride();
  const [editing, setEditing] = useState<RuleOverride | null>(null);
  const formRef = useRef<HTMLDivElement>(null);
  const poolName = (id?: number | null) => (pools.data ?? []).find((p) => p.id === id)?.name ?? String(id ?? "—");
  return (
    <Panel title={t("overrides.rules")} testId="rule-overrides">
      <p className="small muted">{t("overrides.rulesIntro")}</p>
      <QueryState query={overrides} what={t("overrides.rules")} isEmpty={(d) => d.length === 0} empty={t("overrides.noRules")}>
        {(rows) => (
          <div className="table-wrap">
            <table className="table table--compact" data-testid="rule-overrides-table">
              <caption className="visually-hidden">{t("overrides.rules")}</caption>
              <thead><tr>
                <th scope="col">{t("overrides.rule")}</th><th scope="col">{t("overrides.pool")}</th><th scope="col">{t("overrides.enabled")}</th>
                <th scope="col">{t("overrides.params")}</th><th scope="col">{t("overrides.hold")}</th><th scope="col">{t("overrides.note")}</th>
                <th scope="col">{t("overrides.updated")}</th><th scope="col"><span className="visually-hidden">{t("overrides.actions")}</span></th>
              </tr></thead>
              <tbody>
                {rows.map((row) => {
                  const what = { rule: row.rule, pool: poolName(row.pool) };
                  return (
                    <tr key={row.id} data-testid="rule-override-row" className={row.id === editing?.id ? "row--editing" : undefined}>
                      <td><code>{row.rule}</code></td>
                      <td>{poolName(row.pool)}</td>
                      <td>{row.enabled == null ? "—" : row.enabled ? t("common.yes") : t("common.no")}</td>
                      <td className="wrap"><code>{row.params && Object.keys(row.params as object).length ? formatValue(row.params) : "—"}</code></td>
                      <td>{row.duration_s == null ? "—" : `${row.duration_s} s`}</td>
                      <td className="wrap">{row.note || "—"}</td>
                      <td>{formatDateTime(row.updated_at)}</td>
                      <td><Can role="operator">
                        <div className="row-actions">
                          <button type="button" className="btn btn--small" aria-label={t("overrides.editRuleAria", what)}
                            onClick={() => { setEditing(row); scrollIntoViewSoon(formRef); }}>{t("form.edit")}</button>
                          <ConfirmButton label={t("overrides.delete")} ariaLabel={t("overrides.deleteRuleAria", what)}
                            warning={t("overrides.deleteRuleWarning")} pending={remove.isPending}
                            error={remove.variables === row.id ? remove.error : null}
                            onConfirm={() => remove.mutate(row.id, { onSuccess: () => { if (editing?.id === row.id) setEditing(null); } })} />
                        </div>
                      </Can></td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        )}
      </QueryState>
      <Can role="operator">
        <div ref={formRef}><RuleOverrideForm key={editing?.id ?? "new"} editing={editing} onDone={() => setEditing(null)} /></div>
      </Can>
    </Panel>
  );
}

function paramsText(params: unknown): string {
  return params && typeof params === "object" && Object.keys(params).length ? JSON.stringify(params) : "";
}

/** Adds an override, or edits the one picked in the table. An edit sends the whole override (PUT), so the
 * parameters in the field are exactly the ones kept. */
function RuleOverrideForm({ editing, onDone }: { editing: RuleOverride | null; onDone: () => void }) {
  const { t } = useTranslation();
  const rules = useRules();
  const pools = usePoolChoices();
  const create = useCreateRuleOverride();
  const update = useUpdateRuleOverride();
  const write = editing ? update : create;
  const [rule, setRule] = useState(editing?.rule ?? "");
  const [pool, setPool] = useState<number | "">(editing?.pool ?? "");
  const [enabled, setEnabled] = useState<"" | "true" | "false">(editing?.enabled == null ? "" : editing.enabled ? "true" : "false");
  const [duration, setDuration] = useState(editing?.duration_s != null ? String(editing.duration_s) : "");
  const [params, setParams] = useState(paramsText(editing?.params));
  const [note, setNote] = useState(editing?.note ?? "");
  const [paramsError, setParamsError] = useState<string[] | undefined>();
  const fields = fieldErrors(write.error);
  const known = ["rule", "pool", "enabled", "duration_s", "params", "note", ...Object.keys(fields).filter((k) => k.startsWith("params."))];
  const paramFieldErrors = Object.entries(fields).filter(([k]) => k.startsWith("params")).flatMap(([k, v]) => v.map((m) => (k === "params" ? m : `${k.slice(7)}: ${m}`)));
  const submit = (event: FormEvent) => {
    event.preventDefault();
    let parsed: Record<string, unknown> = {};
    if (params.trim()) {
      try {
        parsed = JSON.parse(params);
        if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("not an object");
      } catch {
        setParamsError([t("overrides.paramsInvalid")]);
        return;
      }
    }
    setParamsError(undefined);
    const body = {
      rule, pool: pool as number, params: parsed, note: note.trim(),
      enabled: enabled === "" ? null : enabled === "true",
      duration_s: integerOrAsTyped(duration),
    };
    if (editing) update.mutate({ id: editing.id, body }, { onSuccess: onDone });
    else create.mutate(body, { onSuccess: () => { setParams(""); setNote(""); setDuration(""); } });
  };
  const title = editing ? t("overrides.editRule", { rule: editing.rule }) : t("overrides.createRule");
  return (
    <form className="form-grid" onSubmit={submit} aria-label={title} data-testid="rule-override-form">
      <h3 className="form-grid__title">{title}</h3>
      <label className="field"><span>{t("overrides.rule")}</span>
        <select value={rule} required onChange={(e) => setRule(e.target.value)} aria-invalid={Boolean(fields.rule) || undefined}>
          <option value="">{t("overrides.chooseRule")}</option>
          {(rules.data ?? []).map((r) => <option key={r.slug} value={r.slug}>{r.slug}</option>)}
        </select><FieldError errors={fields.rule} /></label>
      <label className="field"><span>{t("overrides.pool")}</span>
        <select value={pool} required onChange={(e) => setPool(e.target.value ? Number(e.target.value) : "")} aria-invalid={Boolean(fields.pool) || undefined}>
          <option value="">{t("overrides.choosePool")}</option>
          {(pools.data ?? []).map((p) => <option key={p.id} value={p.id}>{p.name}</option>)}
        </select><FieldError errors={fields.pool} /></label>
      <label className="field"><span>{t("overrides.enabled")}</span>
        <select value={enabled} onChange={(e) => setEnabled(e.target.value as "" | "true" | "false")}>
          <option value="">{t("overrides.asCatalog")}</option>
          <option value="true">{t("common.yes")}</option>
          <option value="false">{t("common.no")}</option>
        </select><FieldError errors={fields.enabled} /></label>
      <label className="field"><span>{t("overrides.holdSeconds")}</span>
        <input inputMode="numeric" value={duration} onChange={(e) => setDuration(e.target.value)} aria-invalid={Boolean(fields.duration_s) || undefined} />
        <FieldError errors={fields.duration_s} /></label>
      <label className="field"><span>{t("overrides.paramsJson")}</span>
        <input value={params} placeholder='{"max_c": 85}' onChange={(e) => setParams(e.target.value)} aria-invalid={Boolean(paramsError || paramFieldErrors.length) || undefined} data-testid="rule-override-params" />
        <FieldError errors={paramsError ?? (paramFieldErrors.length ? paramFieldErrors : undefined)} /></label>
      <label className="field"><span>{t("overrides.note")}</span>
        <input value={note} onChange={(e) => setNote(e.target.value)} /><FieldError errors={fields.note} /></label>
      <div className="form-grid__actions">
        <button type="submit" className="btn btn--primary" disabled={write.isPending}>{editing ? t("form.saveChanges") : t("overrides.add")}</button>
        {editing ? <button type="button" className="btn" onClick={onDone}>{t("action.cancel")}</button> : null}
      </div>
      <FormError error={write.error} known={known} />
    </form>
  );
}
