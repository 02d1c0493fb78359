// The rule catalog in triage order. Operators change thresholds and durations and enable/disable rules;
// viewers see the same values as plain text, with no controls.
import { useState } from "react";
import { useTranslation } from "react-i18next";
import { ApiError } from "@/shared/api/client";
import { useHasRole } from "@/shared/auth/Authorization";
import { TRIAGE_STEPS } from "@/shared/lib/domain";
import { formatValue } from "@/shared/lib/format";
import { Badge, severityTone } from "@/shared/ui/Badge";
import { QueryState } from "@/shared/ui/QueryState";
import { useRules, useUpdateRule } from "../api/rules";
import { ruleParams, type ParamSpec, type Rule } from "../types/rules";

/** The params a rule takes: from its specs, plus any value the server holds that no spec describes. */
function paramSpecs(rule: Rule): ParamSpec[] {
  const specs = [...(rule.param_specs ?? [])];
  for (const [name, value] of Object.entries(ruleParams(rule))) {
    if (!specs.some((spec) => spec.name === name)) {
      specs.push({ name, kind: typeof value === "boolean" ? "boolean" : "number", default: value, help: "", minimum: null, maximum: null });
    }
  }
  return specs;
}

function currentValue(rule: Rule, spec: ParamSpec): unknown {
  const params = ruleParams(rule);
  return spec.name in params ? params[spec.name] : spec.default;
}

function toText(value: unknown): string {
  if (Array.isArray(value)) return value.join(", ");
  return value === null || value === undefined ? "" : String(value);
}

function parse(spec: ParamSpec, text: string): unknown {
  switch (spec.kind) {
    case "boolean":
      return text === "true";
    case "string_list":
      return text.split(",").map((item) => item.trim()).filter(Boolean);
    case "integer":
    case "number":
      return text.trim() === "" ? null : Number(text);
    default:
      return text;
  }
}

function invalidNumber(spec: ParamSpec, text: string | undefined): boolean {
  if (text === undefined || (spec.kind !== "number" && spec.kind !== "integer")) return false;
  const value = Number(text);
  if (text.trim() === "" || Number.isNaN(value)) return true;
  if (spec.kind === "integer" && !Number.isInteger(value)) return true;
  return (spec.minimum != null && value < spec.minimum) || (spec.maximum != null && value > spec.maximum);
}

export function RuleRow({ rule, canEdit }: { rule: Rule; canEdit: boolean }) {
  const { t } = useTranslation();
  const update = useUpdateRule();
  const [draft, setDraft] = useState<Record<string, string>>({});
  const [duration, setDuration] = useState<string | undefined>(undefined);
  const specs = paramSpecs(rule);
  const dirty = Object.keys(draft).length > 0 || duration !== undefined;
  const durationInvalid = duration !== undefined && (duration.trim() === "" || !Number.isInteger(Number(duration)) || Number(duration) < 0);
  const invalid = durationInvalid || specs.some((spec) => invalidNumber(spec, draft[spec.name]));
  const fieldErrors = update.error instanceof ApiError ? update.error.fields : {};
  const label = (spec: ParamSpec) => t(`ruleParam.${spec.name}`, { defaultValue: spec.name.replace(/_/g, " ") });

  const save = () => {
    const params: Record<string, unknown> = { ...ruleParams(rule) };
    for (const spec of specs) if (spec.name in draft) params[spec.name] = parse(spec, draft[spec.name]);
    const changes = { ...(Object.keys(draft).length ? { params } : {}), ...(duration !== undefined ? { duration_s: Number(duration) } : {}) };
    update.mutate({ slug: rule.slug, changes }, { onSuccess: () => { setDraft({}); setDuration(undefined); } });
  };

  return (
    <tr data-testid="rule-row" data-rule={rule.slug}>
      <td>
        <strong>{rule.title}</strong>
        <div className="muted small"><code>{rule.slug}</code>{rule.description ? ` — ${rule.description}` : ""}</div>
      </td>
      <td>{t(`layer.${rule.layer}`, { defaultValue: rule.layer })}</td>
      <td><Badge tone={severityTone(rule.severity)}>{t(`severity.${rule.severity}`, { defaultValue: rule.severity })}</Badge></td>
      <td>
        {canEdit ? (
          <label className="toggle">
            <input type="checkbox" checked={rule.enabled ?? true} disabled={update.isPending}
              aria-label={t("rules.enableAria", { name: rule.title })}
              onChange={(e) => update.mutate({ slug: rule.slug, changes: { enabled: e.target.checked } })} />
            <span>{rule.enabled ? t("rules.enabled") : t("rules.disabled")}</span>
          </label>
        ) : (
          <Badge tone={rule.enabled ? "good" : "muted"}>{rule.enabled ? t("rules.enabled") : t("rules.disabled")}</Badge>
        )}
      </td>
      <td>
        {canEdit ? (
          <div className="params">
            <label className="param" title={t("rules.durationHelp")}>
              <span>{t("rules.durationLabel")}</span>
              <input type="number" min={0} step={1} value={duration ?? String(rule.duration_s ?? 0)}
                aria-invalid={durationInvalid || fieldErrors.duration_s ? true : undefined}
                onChange={(e) => setDuration(e.target.value)} />
            </label>
            {specs.map((spec) => {
              const value = currentValue(rule, spec);
              const text = draft[spec.name] ?? toText(value);
              const onChange = (next: string) => setDraft({ ...draft, [spec.name]: next });
              return (
                <label key={spec.name} className="param" title={spec.help || undefined}>
                  <span>{label(spec)}</span>
                  {spec.kind === "boolean" ? (
                    <select value={text} onChange={(e) => onChange(e.target.value)}>
                      <option value="true">{t("common.yes")}</option>
                      <option value="false">{t("common.no")}</option>
                    </select>
                  ) : (
                    <input type={spec.kind === "string_list" ? "text" : "number"} value={text}
                      step={spec.kind === "integer" ? 1 : "any"} min={spec.minimum ?? undefined} max={spec.maximum ?? undefined}
                      aria-invalid={invalidNumber(spec, draft[spec.name]) || fieldErrors[`params.${spec.name}`] ? true : undefined}
                      onChange={(e) => onChange(e.target.value)} />
                  )}
                </label>
              );
            })}
            <span className="params__actions">
              <button type="button" className="btn btn--small btn--primary" disabled={!dirty || invalid || update.isPending} onClick={save}>
                {update.isPending ? t("action.saving") : t("action.save")}
              </button>
              {dirty ? <button type="button" className="btn btn--small" onClick={() => { setDraft({}); setDuration(undefined); }}>{t("action.cancel")}</button> : null}
            </span>
          </div>
        ) : (
          <ul className="params params--read">
            <li><span className="muted">{t("rules.durationLabel")}:</span> {formatValue(rule.duration_s)}</li>
            {specs.map((spec) => (
              <li key={spec.name} title={spec.help || undefined}><span className="muted">{label(spec)}:</span> {formatValue(toText(currentValue(rule, spec)))}</li>
            ))}
          </ul>
        )}
        {update.isError ? <div className="state state--error small" role="alert">{(update.error as Error).message}</div> : null}
      </td>
    </tr>
  );
}

export function RulesTable({ rules, canEdit }: { rules: Rule[]; canEdit: boolean }) {
  const { t } = useTranslation();
  return (
    <>
      {TRIAGE_STEPS.map((step, index) => {
        const inStep = rules.filter((rule) => rule.step === step);
        if (!inStep.length) return null;
        return (
          <section key={step} className="panel" aria-labelledby={`rules-${step}`}>
            <h2 id={`rules-${step}`} className="panel__title">
              {t("triage.stepN", { n: index + 1 })} — {t(`step.${step}`)}
            </h2>
            <div className="table-wrap">
              <table className="table rules-table">
                <caption className="visually-hidden">{t(`step.${step}`)}</caption>
                <colgroup>
                  <col className="rules-table__rule" />
                  <col className="rules-table__layer" />
                  <col className="rules-table__severity" />
                  <col className="rules-table__state" />
                  <col />
                </colgroup>
                <thead>
                  <tr>
                    <th scope="col">{t("rules.rule")}</th>
                    <th scope="col">{t("findings.layer")}</th>
                    <th scope="col">{t("findings.severity")}</th>
                    <th scope="col">{t("rules.state")}</th>
                    <th scope="col">{t("rules.params")}</th>
                  </tr>
                </thead>
                <tbody>
                  {inStep.map((rule) => <RuleRow key={rule.slug} rule={rule} canEdit={canEdit} />)}
                </tbody>
              </table>
            </div>
          </section>
        );
      })}
    </>
  );
}

export function RulesPage() {
  const { t } = useTranslation();
  const rules = useRules();
  const canEdit = useHasRole("operator");
  return (
    <div className="page">
      <h1>{t("rules.title")}</h1>
      <p className="muted">{canEdit ? t("rules.introOperator") : t("rules.introViewer")}</p>
      <QueryState query={rules} what={t("rules.title")} isEmpty={(d) => d.length === 0} empty={t("rules.none")}>
        {(data) => <RulesTable rules={data} canEdit={canEdit} />}
      </QueryState>
    </div>
  );
}
