// SSH hosts: register bare-metal hosts, confirm each host key's fingerprint (nothing is trusted silently), and
// bootstrap the agent on many hosts at once with progress per host.
import { useState, type FormEvent } from "react";
import { useTranslation } from "react-i18next";
import { ApiError } from "@/shared/api/client";
import { usePools } from "@/shared/api/lookups";
import { Can } from "@/shared/auth/Authorization";
import { formatRelative } from "@/shared/lib/format";
import { Badge } from "@/shared/ui/Badge";
import { FieldError } from "@/shared/ui/FieldError";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import { useConfirmHostKey, useCreateHost, useHosts, useKeys, useRun, useRuns, useScanHost, useStartBootstrap } from "../api/ssh";
import {
  ALLOWABLE_ACTIONS, BOOTSTRAP_TONE, bootstrapProgress, HOST_KEY_TONE, needsConfirmation,
  type SSHHost,
} from "../types/ssh";

function errorText(error: unknown): string {
  if (error instanceof ApiError) return [error.message, ...Object.values(error.fields).flat()].join(" ");
  return error instanceof Error ? error.message : String(error);
}

function RegisterHostForm() {
  const { t } = useTranslation();
  const create = useCreateHost();
  const keys = useKeys();
  const pools = usePools();
  const [address, setAddress] = useState("");
  const [port, setPort] = useState("22");
  const [username, setUsername] = useState("root");
  const [key, setKey] = useState("");
  const [pool, setPool] = useState("");
  const fields = create.error instanceof ApiError ? create.error.fields : {};

  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate(
      { address: address.trim(), port: Number(port), username: username.trim(), key: key ? Number(key) : null,
        pool: pool ? Number(pool) : null },
      { onSuccess: () => setAddress("") },
    );
  };

  return (
    <Panel title={t("ssh.register")}>
      <form className="form-grid" onSubmit={submit} aria-label={t("ssh.register")}>
        <label className="field">
          <span>{t("ssh.address")}</span>
          <input value={address} required onChange={(e) => setAddress(e.target.value)} placeholder="10.0.0.21" />
          <FieldError errors={fields.address} />
        </label>
        <label className="field">
          <span>{t("ssh.port")}</span>
          <input type="number" min={1} max={65535} value={port} required onChange={(e) => setPort(e.target.value)} />
          <FieldError errors={fields.port} />
        </label>
        <label className="field">
          <span>{t("ssh.user")}</span>
          <input value={username} required onChange={(e) => setUsername(e.target.value)} />
          <FieldError errors={fields.username} />
        </label>
        <label className="field">
          <span>{t("ssh.key")}</span>
          <select value={key} onChange={(e) => setKey(e.target.value)}>
            <option value="">{t("ssh.useAgent")}</option>
            {(keys.data ?? []).map((k) => <option key={k.id} value={k.id}>{k.name} ({k.fingerprint})</option>)}
          </select>
          <FieldError errors={fields.key} />
        </label>
        <label className="field">
          <span>{t("ssh.pool")}</span>
          <select value={pool} onChange={(e) => setPool(e.target.value)}>
            <option value="">{t("ssh.noPool")}</option>
            {(pools.data ?? []).map((p) => <option key={p.id} value={p.id}>{p.name}</option>)}
          </select>
        </label>
        <div className="form-grid__actions">
          <button type="submit" className="btn btn--primary" disabled={create.isPending}>
            {create.isPending ? t("action.saving") : t("ssh.registerSubmit")}
          </button>
        </div>
        {create.isError && Object.keys(fields).length === 0 ? (
          <div className="state state--error" role="alert">{errorText(create.error)}</div>
        ) : null}
      </form>
      <p className="small muted">{t("ssh.registerHint")}</p>
    </Panel>
  );
}

/** The fingerprint the host offered, and an explicit confirmation that sends exactly that fingerprint back. */
function ConfirmFingerprint({ host }: { host: SSHHost }) {
  const { t } = useTranslation();
  const confirm = useConfirmHostKey();
  const [checking, setChecking] = useState(false);
  const changed = host.host_key_state === "changed";
  if (!checking) {
    return (
      <button type="button" className={`btn btn--small${changed ? "" : " btn--primary"}`}
        aria-label={t("ssh.confirmAria", { host: host.address })} onClick={() => setChecking(true)}>
        {changed ? t("ssh.reviewChanged") : t("ssh.confirm")}
      </button>
    );
  }
  return (
    <div role="group" aria-label={t("ssh.confirmAria", { host: host.address })} className="confirm-box">
      {changed ? (
        <p className="small state--error">{t("ssh.changedWarning", { pinned: host.host_key_fingerprint })}</p>
      ) : null}
      <p className="small">{t("ssh.compare")}</p>
      <code className="mono" data-testid="offered-fingerprint">{host.offered_fingerprint}</code>
      <div>
        <button type="button" className="btn btn--small btn--primary" disabled={confirm.isPending}
          onClick={() => confirm.mutate({ id: host.id, fingerprint: host.offered_fingerprint },
            { onSuccess: () => setChecking(false) })}>
          {t("ssh.confirmYes")}
        </button>{" "}
        <button type="button" className="btn btn--small" onClick={() => { setChecking(false); confirm.reset(); }}>
          {t("action.cancel")}
        </button>
      </div>
      {confirm.isError ? <div className="field__error" role="alert">{errorText(confirm.error)}</div> : null}
    </div>
  );
}

function HostList({ selected, onSelect }: { selected: Set<number>; onSelect: (ids: Set<number>) => void }) {
  const { t } = useTranslation();
  const hosts = useHosts();
  const scan = useScanHost();
  const toggle = (id: number) => {
    const next = new Set(selected);
    if (next.has(id)) next.delete(id); else next.add(id);
    onSelect(next);
  };
  return (
    <Panel title={t("ssh.hosts")}>
      <QueryState query={hosts} what={t("ssh.hosts")} isEmpty={(d) => d.length === 0} empty={t("ssh.none")}>
        {(data) => (
          <div className="table-wrap">
            <table className="table table--compact" data-testid="ssh-hosts">
              <caption className="visually-hidden">{t("ssh.hosts")}</caption>
              <thead>
                <tr>
                  <th scope="col"><span className="visually-hidden">{t("ssh.select")}</span></th>
                  <th scope="col">{t("ssh.host")}</th>
                  <th scope="col">{t("ssh.key")}</th>
                  <th scope="col">{t("ssh.pool")}</th>
                  <th scope="col">{t("ssh.node")}</th>
                  <th scope="col">{t("ssh.hostKey")}</th>
                  <th scope="col">{t("ssh.lastContact")}</th>
                  <th scope="col"><span className="visually-hidden">{t("ssh.actions")}</span></th>
                </tr>
              </thead>
              <tbody>
                {data.map((host) => (
                  <tr key={host.id}>
                    <td>
                      <input type="checkbox" aria-label={t("ssh.selectHost", { host: host.address })}
                        checked={selected.has(host.id)} onChange={() => toggle(host.id)} />
                    </td>
                    <td><code>{host.username}@{host.address}:{host.port}</code>
                      {host.jump_host_label ? <div className="small muted">{t("ssh.via", { jump: host.jump_host_label })}</div> : null}
                    </td>
                    <td>{host.key_name ?? t("ssh.useAgent")}</td>
                    <td>{host.pool_name ?? "—"}</td>
                    <td>{host.node_hostname ?? "—"}</td>
                    <td>
                      <Badge tone={HOST_KEY_TONE[host.host_key_state]}>{t(`ssh.keyState.${host.host_key_state}`)}</Badge>
                      <div className="small mono">{host.host_key_fingerprint || host.offered_fingerprint || ""}</div>
                      {host.last_error ? <div className="small state--error">{host.last_error}</div> : null}
                    </td>
                    <td>{host.last_contact_at ? formatRelative(host.last_contact_at) : t("ssh.never")}</td>
                    <td>
                      <Can>
                        {needsConfirmation(host) ? <ConfirmFingerprint host={host} /> : null}{" "}
                        <button type="button" className="btn btn--small" disabled={scan.isPending}
                          onClick={() => scan.mutate(host.id)} aria-label={t("ssh.scanAria", { host: host.address })}>
                          {t("ssh.scan")}
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
    </Panel>
  );
}

function RunProgress({ runId }: { runId: number }) {
  const { t } = useTranslation();
  const run = useRun(runId);
  return (
    <QueryState query={run} what={t("ssh.run", { id: runId })}>
      {(data) => {
        const progress = bootstrapProgress(data);
        return (
          <div data-testid="bootstrap-run">
            <p>
              {t("ssh.runTitle", { id: data.id, pool: data.pool_name })}{" "}
              <Badge tone={progress.running ? "info" : progress.failed ? "warn" : "good"}>
                {progress.running ? t("ssh.running") : t("ssh.finished")}
              </Badge>
            </p>
            <progress max={progress.total} value={progress.finished} aria-label={t("ssh.progress")} />{" "}
            <span>{t("ssh.progressText", { finished: progress.finished, total: progress.total, failed: progress.failed })}</span>
            <div className="table-wrap">
              <table className="table table--compact" data-testid="bootstrap-hosts">
                <caption className="visually-hidden">{t("ssh.perHost")}</caption>
                <thead>
                  <tr>
                    <th scope="col">{t("ssh.host")}</th>
                    <th scope="col">{t("ssh.state")}</th>
                    <th scope="col">{t("ssh.message")}</th>
                    <th scope="col">{t("ssh.node")}</th>
                  </tr>
                </thead>
                <tbody>
                  {data.hosts.map((row) => (
                    <tr key={row.id}>
                      <td><code>{row.host_label}</code></td>
                      <td><Badge tone={BOOTSTRAP_TONE[row.state]}>{t(`ssh.bootstrapState.${row.state}`)}</Badge></td>
                      <td className="small">{row.message}</td>
                      <td>{row.node_hostname ?? "—"}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </div>
        );
      }}
    </QueryState>
  );
}

function Bootstrap({ selected }: { selected: Set<number> }) {
  const { t } = useTranslation();
  const pools = usePools();
  const runs = useRuns();
  const start = useStartBootstrap();
  const [pool, setPool] = useState("");
  const [offline, setOffline] = useState(false);
  const [allow, setAllow] = useState<Set<string>>(new Set());
  const [shown, setShown] = useState<number | null>(null);
  const fields = start.error instanceof ApiError ? start.error.fields : {};
  const current = shown ?? runs.data?.[0]?.id ?? null;

  const submit = (event: FormEvent) => {
    event.preventDefault();
    start.mutate(
      { pool: Number(pool), hosts: [...selected],
        options: { offline, allow_actions: [...allow] as (typeof ALLOWABLE_ACTIONS)[number][], root: "", python: "",
          no_systemd: false, force: false } },
      { onSuccess: (run) => setShown(run.id) },
    );
  };
  const toggle = (kind: string) => {
    const next = new Set(allow);
    if (next.has(kind)) next.delete(kind); else next.add(kind);
    setAllow(next);
  };

  return (
    <Panel title={t("ssh.bootstrap")}>
      <Can>
        <form className="form-grid" onSubmit={submit} aria-label={t("ssh.bootstrap")}>
          <label className="field">
            <span>{t("ssh.intoPool")}</span>
            <select value={pool} required onChange={(e) => setPool(e.target.value)}>
              <option value="">{t("ssh.choosePool")}</option>
              {(pools.data ?? []).map((p) => <option key={p.id} value={p.id}>{p.name}</option>)}
            </select>
            <FieldError errors={fields.pool} />
          </label>
          <fieldset className="field">
            <legend>{t("ssh.allowActions")}</legend>
            {ALLOWABLE_ACTIONS.map((kind) => (
              <label key={kind} className="toggle">
                <input type="checkbox" checked={allow.has(kind)} onChange={() => toggle(kind)} /> {t(`ssh.action.${kind}`)}
              </label>
            ))}
            <span className="small muted">{t("ssh.allowHint")}</span>
          </fieldset>
          <label className="toggle">
            <input type="checkbox" checked={offline} onChange={(e) => setOffline(e.target.checked)} /> {t("ssh.offline")}
          </label>
          <div className="form-grid__actions">
            <button type="submit" className="btn btn--primary" disabled={start.isPending || selected.size === 0}>
              {t("ssh.start", { count: selected.size })}
            </button>
          </div>
          {start.isError ? <div className="state state--error" role="alert">{errorText(start.error)}</div> : null}
        </form>
      </Can>
      {(runs.data ?? []).length > 1 ? (
        <label className="field">
          <span>{t("ssh.runs")}</span>
          <select value={current ?? ""} onChange={(e) => setShown(Number(e.target.value))}>
            {(runs.data ?? []).map((run) => (
              <option key={run.id} value={run.id}>{t("ssh.runTitle", { id: run.id, pool: run.pool_name })}</option>
            ))}
          </select>
        </label>
      ) : null}
      {current !== null ? <RunProgress runId={current} /> : <p className="muted">{t("ssh.noRuns")}</p>}
    </Panel>
  );
}

export function SSHHostsPage() {
  const { t } = useTranslation();
  const [selected, setSelected] = useState<Set<number>>(new Set());
  return (
    <section aria-labelledby="ssh-title">
      <h1 id="ssh-title">{t("ssh.title")}</h1>
      <p className="muted">{t("ssh.intro")}</p>
      <Can><RegisterHostForm /></Can>
      <HostList selected={selected} onSelect={setSelected} />
      <Bootstrap selected={selected} />
    </section>
  );
}
