import { useTranslation } from "react-i18next";
import { useEffect, useState } from "react";
import { Link, useSearchParams } from "react-router";
import { usePools, useProviders } from "@/shared/api/lookups";
import { Can } from "@/shared/auth/Authorization";
import { useDebounced } from "@/shared/hooks/useDebounced";
import { useUrlState } from "@/shared/hooks/useUrlState";
import { FINDING_STATES, LAYERS_TOP_DOWN, OWNERS, SEVERITIES, TRIAGE_STEPS } from "@/shared/lib/domain";
import { formatDateTime, formatDuration, formatRelative, secondsSince } from "@/shared/lib/format";
import { choiceParam, intParam } from "@/shared/lib/params";
import { Badge, severityTone } from "@/shared/ui/Badge";
import { Pagination } from "@/shared/ui/Pagination";
import { ErrorState, QueryState } from "@/shared/ui/QueryState";
import { SavedViews } from "@/shared/ui/SavedViews";
import { useBulkOverride } from "../api/bulkOverrides";
import { useFindings, type FindingListParams } from "../api/getFindings";
import { findingTitle } from "../types/findings";

const KEYS = ["node", "pool", "provider", "severity", "step", "layer", "responsible_party", "state", "search", "ordering", "page"] as const;
const PAGE_SIZE = 50;
const SNOOZE_HOURS = 4;
// Most severe first, then the longest open: what to look at first.
const SORTS = [
  ["severity,opened_at", "triageList.sortSeverity"],
  ["-opened_at", "triageList.sortNewest"],
  ["opened_at", "triageList.sortOldest"],
  ["-last_seen", "triageList.sortLastSeen"],
] as const;
type Ordering = NonNullable<FindingListParams["ordering"]>;

function exportHref(params: URLSearchParams): string {
  const query = new URLSearchParams(params);
  query.delete("page");
  if (!query.get("state")) query.set("state", "open");
  else if (query.get("state") === "any") query.delete("state");
  if (!query.get("ordering")) query.set("ordering", SORTS[0][0]);
  return `/api/v1/findings/export/?${query.toString()}`;
}

export function FindingsPage() {
  const { t } = useTranslation();
  const [filters, setFilters] = useUrlState(KEYS);
  const [params] = useSearchParams();
  const [searchText, setSearchText] = useState(filters.search);
  const search = useDebounced(searchText, 300);
  useEffect(() => {
    if (search !== filters.search) setFilters({ search });
  }, [search, filters.search, setFilters]);
  const pools = usePools();
  const providers = useProviders();
  const [selected, setSelected] = useState<Set<number>>(new Set());
  const [reason, setReason] = useState("");
  const bulk = useBulkOverride();
  const ordering = filters.ordering || SORTS[0][0];
  const page = Math.max(1, Number(filters.page) || 1);
  // "open" unless the user picked another state ("any" shows all).
  const state = filters.state === "any" ? undefined : choiceParam(FINDING_STATES, filters.state || "open");
  const findings = useFindings({
    page,
    page_size: PAGE_SIZE,
    node: intParam(filters.node),
    pool: intParam(filters.pool),
    provider: intParam(filters.provider),
    search: filters.search || undefined,
    ordering: ordering.split(",") as Ordering,
    severity: choiceParam(SEVERITIES, filters.severity),
    step: choiceParam(TRIAGE_STEPS, filters.step),
    layer: choiceParam(LAYERS_TOP_DOWN, filters.layer),
    responsible_party: choiceParam(OWNERS, filters.responsible_party),
    state,
  });

  const select = (key: (typeof KEYS)[number], label: string, options: Array<[string, string]>, allValue = "") => (
    <label className="field">
      <span>{label}</span>
      <select value={filters[key]} onChange={(e) => setFilters({ [key]: e.target.value })}>
        <option value={allValue}>{t("filter.all")}</option>
        {options.map(([value, text]) => <option key={value} value={value}>{text}</option>)}
      </select>
    </label>
  );

  return (
    <div className="page">
      <h1>{t("findings.title")}</h1>
      <form className="filters" aria-label={t("findings.filtersLabel")} onSubmit={(e) => e.preventDefault()}>
        <label className="field field--grow">
          <span>{t("triageList.search")}</span>
          <input type="search" value={searchText} placeholder={t("triageList.searchPlaceholder")}
            onChange={(e) => setSearchText(e.target.value)} />
        </label>
        <label className="field">
          <span>{t("findings.state")}</span>
          <select value={filters.state || "open"} onChange={(e) => setFilters({ state: e.target.value === "open" ? null : e.target.value })}>
            {FINDING_STATES.map((value) => <option key={value} value={value}>{t(`findingState.${value}`)}</option>)}
            <option value="any">{t("filter.all")}</option>
          </select>
        </label>
        {select("severity", t("findings.severity"), SEVERITIES.map((s) => [s, t(`severity.${s}`)]))}
        {select("step", t("findings.step"), TRIAGE_STEPS.map((s) => [s, t(`step.${s}`)]))}
        {select("layer", t("findings.layer"), LAYERS_TOP_DOWN.map((l) => [l, t(`layer.${l}`)]))}
        {select("responsible_party", t("findings.responsible"), OWNERS.map((o) => [o, t(`owner.${o}`)]))}
        {select("pool", t("nodes.col.pool"), (pools.data ?? []).map((p) => [String(p.id), p.name]))}
        {select("provider", t("triageList.provider"), (providers.data ?? []).map((p) => [String(p.id), p.name]))}
        <label className="field">
          <span>{t("triageList.sortBy")}</span>
          <select value={ordering} onChange={(e) => setFilters({ ordering: e.target.value === SORTS[0][0] ? null : e.target.value })}>
            {SORTS.map(([value, label]) => <option key={value} value={value}>{t(label)}</option>)}
          </select>
        </label>
        {filters.node ? (
          <button type="button" className="btn btn--link" onClick={() => setFilters({ node: null })}>
            {t("findings.clearNode", { node: filters.node })}
          </button>
        ) : null}
      </form>
      <div className="list-tools">
        <SavedViews page="findings" />
        <a className="btn btn--small" href={exportHref(params)} download data-testid="findings-export">{t("triageList.exportCsv")}</a>
      </div>
      <Can>
        {selected.size ? (
          <form className="bulk-bar" data-testid="findings-bulk" onSubmit={(e) => e.preventDefault()}>
            <strong>{t("triageList.selected", { count: selected.size })}</strong>
            <label className="field">
              <span>{t("triageList.bulkReason")}</span>
              <input value={reason} maxLength={500} required onChange={(e) => setReason(e.target.value)} />
            </label>
            <button type="button" className="btn btn--small" disabled={!reason.trim() || bulk.isPending}
              onClick={() => bulk.mutate({ findings: [...selected], kind: "acknowledge", reason }, { onSuccess: () => setSelected(new Set()) })}>
              {t("triageList.ackSelected")}
            </button>
            <button type="button" className="btn btn--small" disabled={!reason.trim() || bulk.isPending}
              onClick={() => bulk.mutate({ findings: [...selected], kind: "snooze", reason,
                until: new Date(Date.now() + SNOOZE_HOURS * 3600_000).toISOString() }, { onSuccess: () => setSelected(new Set()) })}>
              {t("triageList.snoozeSelected")}
            </button>
          </form>
        ) : null}
        {bulk.data ? <div className="state" role="status" data-testid="findings-bulk-result">{t("triageList.updated", { count: bulk.data.length })}</div> : null}
        {bulk.isError ? <ErrorState error={bulk.error} /> : null}
      </Can>
      <QueryState query={findings} what={t("findings.title")} isEmpty={(d) => d.results.length === 0} empty={t("findings.none")}>
        {(data) => (
          <>
            <div className="table-wrap" aria-busy={findings.isFetching}>
              <table className="table" data-testid="findings-table">
                <caption className="visually-hidden">{t("findings.title")}</caption>
                <thead>
                  <tr>
                    <Can><th scope="col" className="col-select">
                      <input type="checkbox" aria-label={t("triageList.selectAll")}
                        checked={data.results.length > 0 && data.results.every((f) => selected.has(f.id))}
                        onChange={(e) => setSelected(e.target.checked ? new Set(data.results.map((f) => f.id)) : new Set())} />
                    </th></Can>
                    <th scope="col">{t("findings.severity")}</th>
                    <th scope="col">{t("findings.finding")}</th>
                    <th scope="col">{t("findings.node")}</th>
                    <th scope="col">{t("triageList.opened")}</th>
                    <th scope="col">{t("findings.step")}</th>
                    <th scope="col">{t("findings.responsible")}</th>
                    <th scope="col">{t("findings.layer")}</th>
                    <th scope="col">{t("findings.lastSeen")}</th>
                  </tr>
                </thead>
                <tbody>
                  {data.results.map((finding) => (
                    <tr key={finding.id} data-testid="finding-row" data-severity={finding.severity}>
                      <Can><td className="col-select">
                        <input type="checkbox" aria-label={t("triageList.selectRow", { name: findingTitle(finding) })}
                          checked={selected.has(finding.id)} onChange={() => setSelected((current) => {
                            const next = new Set(current);
                            if (next.has(finding.id)) next.delete(finding.id);
                            else next.add(finding.id);
                            return next;
                          })} />
                      </td></Can>
                      <td><Badge tone={severityTone(finding.severity)}>{t(`severity.${finding.severity}`, { defaultValue: finding.severity })}</Badge></td>
                      <td>
                        <strong>{findingTitle(finding)}</strong>
                        {finding.recommended_action ? <div className="muted small">{finding.recommended_action}</div> : null}
                      </td>
                      <td><Link to={`/nodes/${finding.node}`}>{finding.hostname || `#${finding.node}`}</Link></td>
                      <td data-col="opened" title={finding.opened_at}>
                        {formatDateTime(finding.opened_at)}
                        <div className="muted small">{finding.state === "open"
                          ? t("triageList.openFor", { age: formatDuration(secondsSince(finding.opened_at)) })
                          : formatRelative(finding.resolved_at)}</div>
                      </td>
                      <td>{t(`step.${finding.step}`, { defaultValue: finding.step })}</td>
                      <td data-col="party">
                        {finding.responsible_party === "provider"
                          ? t("owner.providerNamed", { name: finding.provider_name })
                          : finding.responsible_party ? t(`owner.${finding.responsible_party}`, { defaultValue: finding.responsible_party }) : "—"}
                        {finding.responsible_party === "provider" ? (
                          <div className="muted small" data-testid="support-contact">
                            {finding.provider_support_contact
                              ? t("triageList.supportContact", { contact: finding.provider_support_contact })
                              : t("triageList.noContact")}
                          </div>
                        ) : null}
                      </td>
                      <td>{t(`layer.${finding.layer}`, { defaultValue: finding.layer })}</td>
                      <td title={finding.last_seen}>{formatRelative(finding.last_seen ?? finding.first_seen)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            <Pagination page={page} pageSize={PAGE_SIZE} count={data.count} label={t("findings.pagination")}
              onPage={(next) => setFilters({ page: next }, { resetPage: false })} />
          </>
        )}
      </QueryState>
    </div>
  );
}
