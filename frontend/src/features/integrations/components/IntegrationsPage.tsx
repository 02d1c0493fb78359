// Integrations: where findings and incidents go (PagerDuty, Opsgenie, ServiceNow, Jira, e-mail, Slack, webhooks),
// the routing rules that choose them, and a test button. Admins configure integrations (credentials are
// write-only: the API never sends them back); operators edit routing rules and send test messages.
import { useState, type FormEvent } from "react";
import { useTranslation } from "react-i18next";
import { Link } from "react-router";
import { ApiError } from "@/shared/api/client";
import { Can } from "@/shared/auth/Authorization";
import { Badge } from "@/shared/ui/Badge";
import { CopyButton } from "@/shared/ui/CopyButton";
import { FieldError } from "@/shared/ui/FieldError";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import {
  useConnectorSpecs, useCreateIntegration, useCreateRule, useDeleteRule, useIntegrations, useRoutingRules,
  useSendTest, useSetIntegrationEnabled,
} from "../api/integrations";
import {
  configFrom, MATCH_CHOICES, matchSummary, parseIds, splitList,
  type ConfigFieldSpec, type ConnectorKind, type ConnectorSpec, type Integration, type IntegrationCreated,
  type MatchChoiceField,
} from "../types/integrations";

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function fieldErrors(error: unknown): Record<string, string[]> {
  return error instanceof ApiError ? error.fields : {};
}

/** The inbound URL and token, once, right after creation. */
function InboundToken({ created, onDone }: { created: IntegrationCreated; onDone: () => void }) {
  const { t } = useTranslation();
  return (
    <div className="created-token" data-testid="created-integration" role="status">
      <p><strong>{t("integrations.createdTitle", { name: created.name })}</strong> {t("integrations.tokenOnce")}</p>
      <label className="field">
        <span>{t("integrations.inboundUrl")}</span>
        <input readOnly value={created.inbound_url} className="mono" />
      </label>
      <label className="field">
        <span>{t("integrations.inboundToken")}</span>
        <input readOnly value={created.inbound_token} className="mono" onFocus={(e) => e.currentTarget.select()} />
      </label>
      <div className="form-grid__actions">
        <CopyButton text={created.inbound_token} label={t("integrations.copyToken")} />
        <button type="button" className="btn" onClick={onDone}>{t("tokens.done")}</button>
      </div>
    </div>
  );
}

function ConfigInput({ field, value, onChange }: {
  field: ConfigFieldSpec; value: string | boolean | undefined; onChange: (value: string | boolean) => void;
}) {
  if (field.type === "BooleanField") {
    const checked = value === undefined ? Boolean(field.default) : Boolean(value);
    return <input type="checkbox" checked={checked} onChange={(e) => onChange(e.target.checked)} />;
  }
  if (field.choices.length > 0) {
    return (
      <select value={String(value ?? field.default ?? "")} onChange={(e) => onChange(e.target.value)}>
        {field.choices.map((choice) => <option key={choice} value={choice}>{choice}</option>)}
      </select>
    );
  }
  if (field.name === "ca_bundle") {
    return <textarea rows={3} className="mono" value={String(value ?? "")} onChange={(e) => onChange(e.target.value)} />;
  }
  const placeholder = field.default !== null && field.default !== "" && !Array.isArray(field.default) ? String(field.default) : "";
  return <input value={String(value ?? "")} required={field.required} placeholder={placeholder}
    onChange={(e) => onChange(e.target.value)} />;
}

function NewIntegrationForm({ specs }: { specs: ConnectorSpec[] }) {
  const { t } = useTranslation();
  const create = useCreateIntegration();
  const [kind, setKind] = useState<ConnectorKind>(specs[0]?.kind ?? "webhook");
  const [name, setName] = useState("");
  const [config, setConfig] = useState<Record<string, string | boolean>>({});
  const [secrets, setSecrets] = useState<Record<string, string>>({});
  const spec = specs.find((s) => s.kind === kind);
  const fields = fieldErrors(create.error);
  const shown = new Set(["name", "kind", ...(spec?.config ?? []).map((f) => `config.${f.name}`),
    ...Object.keys(spec?.secrets ?? {}).map((n) => `secrets.${n}`)]);
  const other = Object.entries(fields).filter(([key]) => !shown.has(key)).map(([key, errors]) => `${key}: ${errors.join(" ")}`);

  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (!spec) return;
    const filled = Object.fromEntries(Object.entries(secrets).filter(([, value]) => value !== ""));
    create.mutate(
      { name: name.trim(), kind, config: configFrom(spec.config, config), secrets: filled },
      // Credentials leave the browser's memory once they are stored.
      { onSuccess: () => { setName(""); setConfig({}); setSecrets({}); } },
    );
  };

  return (
    <Panel title={t("integrations.create")}>
      <form className="form-grid" onSubmit={submit} aria-label={t("integrations.create")}>
        <label className="field">
          <span>{t("integrations.kind")}</span>
          <select value={kind} onChange={(e) => { setKind(e.target.value as ConnectorKind); setConfig({}); setSecrets({}); create.reset(); }}>
            {specs.map((s) => <option key={s.kind} value={s.kind}>{s.label}</option>)}
          </select>
        </label>
        <label className="field">
          <span>{t("integrations.name")}</span>
          <input value={name} required maxLength={100} onChange={(e) => setName(e.target.value)} />
          <FieldError errors={fields.name} />
        </label>
        {(spec?.config ?? []).map((field) => (
          <label key={`${kind}-${field.name}`} className="field">
            <span>{field.name}{field.required ? " *" : ""}</span>
            <ConfigInput field={field} value={config[field.name]}
              onChange={(value) => setConfig((previous) => ({ ...previous, [field.name]: value }))} />
            {field.help ? <span className="small muted">{field.help}</span> : null}
            <FieldError errors={fields[`config.${field.name}`]} />
          </label>
        ))}
        {Object.entries(spec?.secrets ?? {}).map(([secret, required]) => (
          <label key={`${kind}-${secret}`} className="field">
            <span>{t("integrations.secret", { name: secret })}{required ? " *" : ""}</span>
            {secret.startsWith("client_")
              ? <textarea rows={3} className="mono" value={secrets[secret] ?? ""}
                  onChange={(e) => setSecrets((previous) => ({ ...previous, [secret]: e.target.value }))} />
              : <input type="password" autoComplete="off" value={secrets[secret] ?? ""} required={required}
                  onChange={(e) => setSecrets((previous) => ({ ...previous, [secret]: e.target.value }))} />}
            <FieldError errors={fields[`secrets.${secret}`]} />
          </label>
        ))}
        <p className="small muted">{t("integrations.secretsNote")}</p>
        <div className="form-grid__actions">
          <button type="submit" className="btn btn--primary" disabled={create.isPending}>
            {create.isPending ? t("action.saving") : t("integrations.submit")}
          </button>
        </div>
        {create.isError && (other.length > 0 || Object.keys(fields).length === 0) ? (
          <div className="state state--error" role="alert">{[errorMessage(create.error), ...other].join(" ")}</div>
        ) : null}
      </form>
      {create.data ? <InboundToken created={create.data} onDone={() => create.reset()} /> : null}
    </Panel>
  );
}

function IntegrationActions({ integration }: { integration: Integration }) {
  const { t } = useTranslation();
  const test = useSendTest();
  const toggle = useSetIntegrationEnabled();
  return (
    <div className="row-actions">
      <Can role="operator">
        <button type="button" className="btn btn--small" disabled={test.isPending || !integration.enabled}
          aria-label={t("integrations.testAria", { name: integration.name })} onClick={() => test.mutate(integration.id)}>
          {t("integrations.test")}
        </button>
      </Can>{" "}
      <Can role="admin">
        <button type="button" className="btn btn--small" disabled={toggle.isPending}
          onClick={() => toggle.mutate({ id: integration.id, enabled: !integration.enabled })}>
          {integration.enabled ? t("integrations.disable") : t("integrations.enable")}
        </button>
      </Can>{" "}
      <Link className="btn btn--small" to={`/integrations/deliveries?integration=${integration.id}`}>
        {t("integrations.deliveries")}
      </Link>
      {test.isSuccess ? <div className="small" role="status">{t("integrations.testQueued")}</div> : null}
      {test.isError || toggle.isError ? (
        <div className="field__error" role="alert">{errorMessage(test.error ?? toggle.error)}</div>
      ) : null}
    </div>
  );
}

function IntegrationList({ specs }: { specs: ConnectorSpec[] }) {
  const { t } = useTranslation();
  const integrations = useIntegrations();
  const label = (kind: string) => specs.find((s) => s.kind === kind)?.label ?? kind;
  return (
    <Panel title={t("integrations.list")}>
      <QueryState query={integrations} what={t("integrations.list")} isEmpty={(d) => d.length === 0} empty={t("integrations.none")}>
        {(data) => (
          <div className="table-wrap">
            <table className="table table--compact" data-testid="integrations">
              <caption className="visually-hidden">{t("integrations.list")}</caption>
              <thead>
                <tr>
                  <th scope="col">{t("integrations.name")}</th>
                  <th scope="col">{t("integrations.kind")}</th>
                  <th scope="col">{t("integrations.status")}</th>
                  <th scope="col">{t("integrations.credentials")}</th>
                  <th scope="col">{t("integrations.inboundUrl")}</th>
                  <th scope="col">{t("integrations.sent")}</th>
                  <th scope="col">{t("integrations.failed")}</th>
                  <th scope="col">{t("integrations.dead")}</th>
                  <th scope="col">{t("integrations.backlog")}</th>
                  <th scope="col"><span className="visually-hidden">{t("integrations.actions")}</span></th>
                </tr>
              </thead>
              <tbody>
                {data.map((integration) => (
                  <tr key={integration.id}>
                    <td>{integration.name}</td>
                    <td>{label(integration.kind)}</td>
                    <td>{integration.enabled
                      ? <Badge tone="good">{t("integrations.enabled")}</Badge>
                      : <Badge tone="muted">{t("integrations.disabled")}</Badge>}</td>
                    <td className="small">{integration.secret_names.length ? integration.secret_names.join(", ") : "—"}</td>
                    <td><code className="small">{integration.inbound_url}</code></td>
                    <td>{integration.sent}</td>
                    <td>{integration.failed}</td>
                    <td>{integration.dead_lettered ? <Badge tone="bad">{integration.dead_lettered}</Badge> : 0}</td>
                    <td>{integration.backlog}</td>
                    <td><IntegrationActions integration={integration} /></td>
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

const ID_FIELDS = ["providers", "pools", "sites"] as const;

function NewRuleForm({ integrations }: { integrations: Integration[] }) {
  const { t } = useTranslation();
  const create = useCreateRule();
  const [integration, setIntegration] = useState(String(integrations[0]?.id ?? ""));
  const [chosen, setChosen] = useState<Record<MatchChoiceField, string[]>>({ event_kinds: [], responsible_parties: [], severities: [] });
  const [ids, setIds] = useState<Record<string, string>>({});
  const [slugs, setSlugs] = useState("");
  const [idError, setIdError] = useState<string | null>(null);
  const fields = fieldErrors(create.error);

  const toggle = (field: MatchChoiceField, value: string) =>
    setChosen((previous) => ({
      ...previous,
      [field]: previous[field].includes(value) ? previous[field].filter((v) => v !== value) : [...previous[field], value],
    }));

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const match: Record<string, unknown> = {};
    for (const [field, values] of Object.entries(chosen)) if (values.length) match[field] = values;
    for (const field of ID_FIELDS) {
      const parsed = parseIds(ids[field] ?? "");
      if (parsed === null) { setIdError(field); return; }
      if (parsed.length) match[field] = parsed;
    }
    if (splitList(slugs).length) match.rules = splitList(slugs);
    setIdError(null);
    create.mutate({ integration: Number(integration), match }, {
      onSuccess: () => { setChosen({ event_kinds: [], responsible_parties: [], severities: [] }); setIds({}); setSlugs(""); },
    });
  };

  return (
    <form className="form-grid" onSubmit={submit} aria-label={t("integrations.addRule")}>
      <label className="field">
        <span>{t("integrations.integration")}</span>
        <select value={integration} onChange={(e) => setIntegration(e.target.value)}>
          {integrations.map((i) => <option key={i.id} value={i.id}>{i.name}</option>)}
        </select>
        <FieldError errors={fields.integration} />
      </label>
      {(Object.keys(MATCH_CHOICES) as MatchChoiceField[]).map((field) => (
        <fieldset key={field} className="field">
          <legend>{t(`integrations.match.${field}`)}</legend>
          {MATCH_CHOICES[field].map((value) => (
            <label key={value} className="toggle">
              <input type="checkbox" checked={chosen[field].includes(value)} onChange={() => toggle(field, value)} /> {value}
            </label>
          ))}
          <FieldError errors={fields[`match.${field}`]} />
        </fieldset>
      ))}
      {ID_FIELDS.map((field) => (
        <label key={field} className="field">
          <span>{t(`integrations.match.${field}`)}</span>
          <input value={ids[field] ?? ""} placeholder="3, 7" onChange={(e) => setIds((previous) => ({ ...previous, [field]: e.target.value }))} />
          <FieldError errors={idError === field ? [t("integrations.idsInvalid")] : fields[`match.${field}`]} />
        </label>
      ))}
      <label className="field">
        <span>{t("integrations.match.rules")}</span>
        <input value={slugs} placeholder="xid, stack_drift" onChange={(e) => setSlugs(e.target.value)} />
        <FieldError errors={fields["match.rules"]} />
      </label>
      <p className="small muted">{t("integrations.ruleHint")}</p>
      <div className="form-grid__actions">
        <button type="submit" className="btn btn--primary" disabled={create.isPending || !integration}>{t("integrations.addRule")}</button>
      </div>
      {create.isError && Object.keys(fields).length === 0 ? (
        <div className="state state--error" role="alert">{errorMessage(create.error)}</div>
      ) : null}
    </form>
  );
}

function RoutingRules() {
  const { t } = useTranslation();
  const rules = useRoutingRules();
  const integrations = useIntegrations();
  const remove = useDeleteRule();
  return (
    <Panel title={t("integrations.rules")}>
      <QueryState query={rules} what={t("integrations.rules")} isEmpty={(d) => d.length === 0} empty={t("integrations.noRules")}>
        {(data) => (
          <div className="table-wrap">
            <table className="table table--compact" data-testid="routing-rules">
              <caption className="visually-hidden">{t("integrations.rules")}</caption>
              <thead>
                <tr>
                  <th scope="col">{t("integrations.integration")}</th>
                  <th scope="col">{t("integrations.matches")}</th>
                  <th scope="col"><span className="visually-hidden">{t("integrations.actions")}</span></th>
                </tr>
              </thead>
              <tbody>
                {data.map((rule) => (
                  <tr key={rule.id}>
                    <td>{rule.integration_name}</td>
                    <td className="small">{matchSummary(rule.match) ?? t("integrations.everything")}</td>
                    <td>
                      <Can role="operator">
                        <button type="button" className="btn btn--small" disabled={remove.isPending}
                          aria-label={t("integrations.deleteRuleAria", { name: rule.integration_name })}
                          onClick={() => remove.mutate(rule.id)}>
                          {t("integrations.deleteRule")}
                        </button>
                      </Can>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </QueryState>
      {integrations.data && integrations.data.length > 0 ? (
        <Can role="operator"><NewRuleForm integrations={integrations.data} /></Can>
      ) : null}
    </Panel>
  );
}

export function IntegrationsPage() {
  const { t } = useTranslation();
  const specs = useConnectorSpecs();
  const list = specs.data ?? [];
  return (
    <div className="page">
      <h1>{t("integrations.title")}</h1>
      <p className="muted">{t("integrations.intro")} <Link to="/integrations/deliveries">{t("integrations.deliveryLog")}</Link></p>
      <IntegrationList specs={list} />
      <RoutingRules />
      {list.length > 0 ? <Can role="admin"><NewIntegrationForm specs={list} /></Can> : null}
    </div>
  );
}
