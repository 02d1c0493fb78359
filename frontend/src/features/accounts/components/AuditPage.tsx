// The audit log: every write with who, when, what and the before/after, filtered by action, object type,
// object id and free text; the filters live in the URL.
import { useState } from "react";
import { useTranslation } from "react-i18next";
import { useDebounced } from "@/shared/hooks/useDebounced";
import { useUrlState } from "@/shared/hooks/useUrlState";
import { formatDateTime, formatValue } from "@/shared/lib/format";
import { Badge } from "@/shared/ui/Badge";
import { Pagination } from "@/shared/ui/Pagination";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import { PAGE_SIZE, useAudit, type AuditEntry, type AuditQuery } from "../api/accounts";

const ACTIONS = ["create", "update", "delete", "action"] as const;
type Action = (typeof ACTIONS)[number];

/** The fields an update changed: {field: [before, after]}. */
export function changedFields(entry: Pick<AuditEntry, "before" | "after">): [string, unknown, unknown][] {
  const before = (entry.before && typeof entry.before === "object" ? entry.before : {}) as Record<string, unknown>;
  const after = (entry.after && typeof entry.after === "object" ? entry.after : {}) as Record<string, unknown>;
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  return keys.filter((key) => JSON.stringify(before[key]) !== JSON.stringify(after[key])).map((key) => [key, before[key], after[key]]);
}

function Changes({ entry }: { entry: AuditEntry }) {
  const [open, setOpen] = useState(false);
  const { t } = useTranslation();
  const changes = changedFields(entry);
  if (!changes.length) return <span className="muted">—</span>;
  return (
    <>
      <button type="button" className="btn btn--small" aria-expanded={open} onClick={() => setOpen(!open)}>
        {t("audit.changes", { count: changes.length })}
      </button>
      {open ? (
        <ul className="small changes">
          {changes.map(([key, before, after]) => (
            <li key={key}><code>{key}</code>: {formatValue(before)} → {formatValue(after)}</li>
          ))}
        </ul>
      ) : null}
    </>
  );
}

export function AuditPage() {
  const { t } = useTranslation();
  const [url, setUrl] = useUrlState(["action", "object_type", "object_id", "search", "page"] as const);
  const [search, setSearch] = useState(url.search);
  const debounced = useDebounced(search, 300);
  const page = Math.max(1, Number(url.page) || 1);
  const query: AuditQuery = {
    page,
    action: (ACTIONS as readonly string[]).includes(url.action) ? (url.action as Action) : undefined,
    object_type: url.object_type || undefined,
    object_id: url.object_id || undefined,
    search: debounced || undefined,
    ordering: ["-at"],
  };
  const audit = useAudit(query);
  return (
    <div className="page" data-testid="audit-page">
      <h1>{t("audit.title")}</h1>
      <p className="muted">{t("audit.intro")}</p>
      <Panel title={t("audit.entries")}>
        <form className="filters" role="search" onSubmit={(e) => { e.preventDefault(); setUrl({ search }); }}>
          <label className="field"><span>{t("audit.action")}</span>
            <select value={url.action} onChange={(e) => setUrl({ action: e.target.value })} data-testid="audit-action">
              <option value="">{t("filter.all")}</option>
              {ACTIONS.map((a) => <option key={a} value={a}>{t(`audit.actions.${a}`)}</option>)}
            </select></label>
          <label className="field"><span>{t("audit.objectType")}</span>
            <input value={url.object_type} placeholder="inventory.provider" onChange={(e) => setUrl({ object_type: e.target.value })} /></label>
          <label className="field"><span>{t("audit.objectId")}</span>
            <input value={url.object_id} onChange={(e) => setUrl({ object_id: e.target.value })} /></label>
          <label className="field"><span>{t("audit.search")}</span>
            <input type="search" value={search} onChange={(e) => { setSearch(e.target.value); setUrl({ search: e.target.value }); }} /></label>
        </form>
        <QueryState query={audit} what={t("audit.title")} isEmpty={(d) => d.count === 0} empty={t("audit.none")}>
          {(data) => (
            <>
              <div className="table-wrap">
                <table className="table table--compact" data-testid="audit-table">
                  <caption className="visually-hidden">{t("audit.entries")}</caption>
                  <thead><tr>
                    <th scope="col">{t("audit.at")}</th><th scope="col">{t("audit.actor")}</th><th scope="col">{t("audit.action")}</th>
                    <th scope="col">{t("audit.object")}</th><th scope="col">{t("audit.changesHeading")}</th><th scope="col">{t("audit.note")}</th>
                  </tr></thead>
                  <tbody>
                    {data.results.map((entry) => (
                      <tr key={entry.id} data-testid="audit-row">
                        <td><time dateTime={entry.at}>{formatDateTime(entry.at)}</time></td>
                        <td>{entry.actor_label || "—"}</td>
                        <td><Badge tone={entry.action === "delete" ? "bad" : entry.action === "create" ? "good" : "info"}>{t(`audit.actions.${entry.action}`)}</Badge></td>
                        <td className="wrap"><code>{entry.object_type}</code> #{entry.object_id} {entry.object_repr}</td>
                        <td><Changes entry={entry} /></td>
                        <td className="wrap">{entry.note || "—"}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
              <Pagination page={page} pageSize={PAGE_SIZE} count={data.count} onPage={(p) => setUrl({ page: p }, { resetPage: false })} label={t("audit.entries")} />
            </>
          )}
        </QueryState>
      </Panel>
    </div>
  );
}
