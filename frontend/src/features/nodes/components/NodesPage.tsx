import { useEffect, useState } from "react";
import { useTranslation } from "react-i18next";
import { Link, useSearchParams } from "react-router";
import { usePools, useProviders } from "@/shared/api/lookups";
import { useDebounced } from "@/shared/hooks/useDebounced";
import { useUrlState } from "@/shared/hooks/useUrlState";
import { BILLING_MODES, DELIVERY_FORMS, NODE_STATES } from "@/shared/lib/domain";
import { Can } from "@/shared/auth/Authorization";
import { formatDuration, secondsSince } from "@/shared/lib/format";
import { boolParam, choiceParam, intParam } from "@/shared/lib/params";
import type { Schemas } from "@/shared/api/client";
import { Badge, nodeStateTone, severityTone } from "@/shared/ui/Badge";
import { Pagination } from "@/shared/ui/Pagination";
import { Empty, ErrorState, Loading } from "@/shared/ui/QueryState";
import { SavedViews } from "@/shared/ui/SavedViews";
import { useBulkCordon } from "../api/bulkCordon";
import { useNodes, type NodeListParams } from "../api/getNodes";

type Node = Schemas["Node"];

const FILTER_KEYS = ["search", "provider", "provider_slug", "pool", "delivery_form", "billing_mode", "state", "silent", "has_findings", "label", "ordering", "page"] as const;
const PAGE_SIZE = 50;
// The server's default order: most severe first, then longest open, then hostname.
const DEFAULT_ORDERING = "severity";

type Ordering = NonNullable<NodeListParams["ordering"]>;

function orderingParam(value: string): Ordering | undefined {
  return value ? (value.split(",") as Ordering) : undefined;
}

/** The list's current filters as a query string for the CSV download (paging left out). */
function exportHref(params: URLSearchParams): string {
  const query = new URLSearchParams(params);
  query.delete("page");
  const search = query.toString();
  return `/api/v1/nodes/export/${search ? `?${search}` : ""}`;
}

function LastReport({ node }: { node: Node }) {
  const { t } = useTranslation();
  const age = secondsSince(node.last_report_at);
  if (age === null) return <span className="muted">{t("triageList.never")}</span>;
  const text = node.silent ? t("triageList.silentFor", { age: formatDuration(age) }) : t("triageList.ago", { age: formatDuration(age) });
  return <span className={node.silent ? "text-bad" : undefined} data-silent={node.silent ? "true" : "false"} title={node.last_report_at ?? ""}>{text}</span>;
}

export function NodesPage() {
  const { t } = useTranslation();
  const [filters, setFilters] = useUrlState(FILTER_KEYS);
  const [searchText, setSearchText] = useState(filters.search);
  const search = useDebounced(searchText, 300);
  const providers = useProviders();
  const pools = usePools();

  useEffect(() => {
    if (search !== filters.search) setFilters({ search });
  }, [search, filters.search, setFilters]);

  const page = Math.max(1, Number(filters.page) || 1);
  const ordering = filters.ordering || DEFAULT_ORDERING;
  const [params] = useSearchParams();
  const [selected, setSelected] = useState<Set<number>>(new Set());
  const [note, setNote] = useState("");
  const cordon = useBulkCordon();
  const nodes = useNodes({
    page,
    page_size: PAGE_SIZE,
    search: filters.search || undefined,
    ordering: orderingParam(filters.ordering),
    has_findings: boolParam(filters.has_findings),
    provider: intParam(filters.provider),
    provider_slug: filters.provider_slug || undefined,
    pool: intParam(filters.pool),
    delivery_form: choiceParam(DELIVERY_FORMS, filters.delivery_form),
    billing_mode: choiceParam(BILLING_MODES, filters.billing_mode),
    state: choiceParam(NODE_STATES, filters.state),
    silent: boolParam(filters.silent),
    label: filters.label || undefined,
  });

  const sortBy = (field: string) => {
    setFilters({ ordering: ordering === field ? `-${field}` : field });
  };
  const rows = nodes.data?.results ?? [];
  const toggle = (id: number) => setSelected((current) => {
    const next = new Set(current);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    return next;
  });
  const allSelected = rows.length > 0 && rows.every((node) => selected.has(node.id));
  const ariaSort = (field: string): "ascending" | "descending" | "none" =>
    ordering === field ? "ascending" : ordering === `-${field}` ? "descending" : "none";
  const sortHeader = (field: string, label: string) => (
    <th key={field} scope="col" aria-sort={ariaSort(field)}>
      <button type="button" className="sort" onClick={() => sortBy(field)}>{label}</button>
    </th>
  );
  const anyFilter = FILTER_KEYS.some((key) => key !== "ordering" && key !== "page" && filters[key]);

  return (
    <div className="page">
      <h1>{t("nodes.title")}</h1>
      <form className="filters" role="search" aria-label={t("nodes.filtersLabel")} onSubmit={(e) => e.preventDefault()}>
        <label className="field field--grow">
          <span>{t("nodes.search")}</span>
          <input type="search" value={searchText} placeholder={t("nodes.searchPlaceholder")}
            onChange={(e) => setSearchText(e.target.value)} />
        </label>
        <label className="field">
          <span>{t("nodes.col.provider")}</span>
          <select value={filters.provider} onChange={(e) => setFilters({ provider: e.target.value })}>
            <option value="">{t("filter.all")}</option>
            {(providers.data ?? []).map((provider) => (
              <option key={provider.id} value={provider.id}>{provider.name}</option>
            ))}
          </select>
        </label>
        <label className="field">
          <span>{t("nodes.col.pool")}</span>
          <select value={filters.pool} onChange={(e) => setFilters({ pool: e.target.value })}>
            <option value="">{t("filter.all")}</option>
            {(pools.data ?? []).map((pool) => (
              <option key={pool.id} value={pool.id}>{pool.name}</option>
            ))}
          </select>
        </label>
        <label className="field">
          <span>{t("nodes.col.deliveryForm")}</span>
          <select value={filters.delivery_form} onChange={(e) => setFilters({ delivery_form: e.target.value })}>
            <option value="">{t("filter.all")}</option>
            {DELIVERY_FORMS.map((form) => <option key={form} value={form}>{t(`deliveryForm.${form}`)}</option>)}
          </select>
        </label>
        <label className="field">
          <span>{t("nodes.col.billingMode")}</span>
          <select value={filters.billing_mode} onChange={(e) => setFilters({ billing_mode: e.target.value })}>
            <option value="">{t("filter.all")}</option>
            {BILLING_MODES.map((mode) => <option key={mode} value={mode}>{t(`billingMode.${mode}`)}</option>)}
          </select>
        </label>
        <label className="field">
          <span>{t("nodes.col.state")}</span>
          <select value={filters.state} onChange={(e) => setFilters({ state: e.target.value })}>
            <option value="">{t("filter.all")}</option>
            {NODE_STATES.map((state) => <option key={state} value={state}>{t(`nodeState.${state}`)}</option>)}
          </select>
        </label>
        <label className="field">
          <span>{t("nodes.reporting")}</span>
          <select value={filters.silent} onChange={(e) => setFilters({ silent: e.target.value })}>
            <option value="">{t("filter.all")}</option>
            <option value="false">{t("nodes.reportingYes")}</option>
            <option value="true">{t("nodes.reportingSilent")}</option>
          </select>
        </label>
        <label className="field">
          <span>{t("triageList.hasFindings")}</span>
          <select value={filters.has_findings} onChange={(e) => setFilters({ has_findings: e.target.value })}>
            <option value="">{t("filter.all")}</option>
            <option value="true">{t("triageList.hasFindingsYes")}</option>
            <option value="false">{t("triageList.hasFindingsNo")}</option>
          </select>
        </label>
        <label className="field">
          <span>{t("nodes.label")}</span>
          <input value={filters.label} placeholder="key=value" onChange={(e) => setFilters({ label: e.target.value })} />
        </label>
        {filters.provider_slug ? (
          <button type="button" className="btn btn--small" onClick={() => setFilters({ provider_slug: null })}
            aria-label={t("filter.remove", { what: filters.provider_slug })}>
            {filters.provider_slug} ×
          </button>
        ) : null}
        {anyFilter ? (
          <button type="button" className="btn btn--link" onClick={() => {
            setSearchText("");
            setFilters({ search: null, provider: null, provider_slug: null, pool: null, delivery_form: null, billing_mode: null, state: null, silent: null, has_findings: null, label: null });
          }}>
            {t("filter.clear")}
          </button>
        ) : null}
      </form>
      <div className="list-tools">
        <SavedViews page="nodes" />
        <a className="btn btn--small" href={exportHref(params)} download data-testid="nodes-export">{t("triageList.exportCsv")}</a>
      </div>
      <Can>
        {selected.size ? (
          <form className="bulk-bar" data-testid="nodes-bulk" onSubmit={(e) => {
            e.preventDefault();
            cordon.mutate({ nodes: [...selected], note }, { onSuccess: () => setSelected(new Set()) });
          }}>
            <strong>{t("triageList.selected", { count: selected.size })}</strong>
            <label className="field">
              <span>{t("triageList.bulkReason")}</span>
              <input value={note} maxLength={500} onChange={(e) => setNote(e.target.value)} />
            </label>
            <button type="submit" className="btn btn--small" disabled={cordon.isPending}>{t("triageList.cordonSelected")}</button>
          </form>
        ) : null}
        {cordon.data ? (
          <div className="state" role="status" data-testid="nodes-bulk-result">
            {t("triageList.cordoned", { count: cordon.data.opened.length })}
            {cordon.data.refused.map((r) => <div key={r.node} className="small">{t("triageList.refused", { hostname: r.hostname, message: r.message })}</div>)}
          </div>
        ) : null}
        {cordon.isError ? <ErrorState error={cordon.error} /> : null}
      </Can>

      {nodes.isPending ? <Loading /> : null}
      {nodes.isError && !nodes.data ? <ErrorState error={nodes.error} onRetry={() => void nodes.refetch()} /> : null}
      {nodes.data ? (
        <>
          {nodes.isError ? <ErrorState error={nodes.error} /> : null}
          <div className="table-wrap" aria-busy={nodes.isFetching}>
            <table className="table" data-testid="nodes-table">
              <caption className="visually-hidden">{t("nodes.caption")}</caption>
              <thead>
                <tr>
                  <Can><th scope="col" className="col-select">
                    <input type="checkbox" aria-label={t("triageList.selectAll")} checked={allSelected}
                      onChange={() => setSelected(allSelected ? new Set() : new Set(rows.map((node) => node.id)))} />
                  </th></Can>
                  {sortHeader("hostname", t("nodes.col.hostname"))}
                  <th scope="col">{t("nodes.col.provider")}</th>
                  {sortHeader("severity", t("triageList.worst"))}
                  {sortHeader("open_findings", t("triageList.openCount"))}
                  <th scope="col">{t("triageList.party")}</th>
                  {sortHeader("last_report_at", t("triageList.lastReport"))}
                  <th scope="col">{t("triageList.gpus")}</th>
                  {sortHeader("state", t("nodes.col.state"))}
                  <th scope="col">{t("nodes.col.pool")}</th>
                  {sortHeader("delivery_form", t("nodes.col.deliveryForm"))}
                  {sortHeader("billing_mode", t("nodes.col.billingMode"))}
                </tr>
              </thead>
              <tbody>
                {rows.map((node) => (
                  <tr key={node.id} data-testid="node-row" data-node={node.hostname}>
                    <Can><td className="col-select">
                      <input type="checkbox" aria-label={t("triageList.selectRow", { name: node.hostname })}
                        checked={selected.has(node.id)} onChange={() => toggle(node.id)} />
                    </td></Can>
                    <td data-col="hostname"><Link to={`/nodes/${node.id}`}>{node.hostname}</Link></td>
                    <td data-col="provider">{node.provider_name}</td>
                    <td data-col="severity">{node.worst_severity
                      ? <Badge tone={severityTone(node.worst_severity)}>{t(`severity.${node.worst_severity}`)}</Badge>
                      : <span className="muted">—</span>}</td>
                    <td data-col="open">{node.open_findings ? <Link to={`/findings?node=${node.id}`}>{node.open_findings}</Link> : "0"}</td>
                    <td data-col="party">{node.headline_party ? t(`owner.${node.headline_party}`, { defaultValue: node.headline_party }) : "—"}</td>
                    <td data-col="last-report"><LastReport node={node} /></td>
                    <td data-col="gpus" className={node.gpus_seen != null && node.gpus_expected && node.gpus_seen < node.gpus_expected ? "text-bad" : undefined}>
                      {t("triageList.gpusShort", { seen: node.gpus_seen ?? "—", expected: node.gpus_expected || "—" })}
                    </td>
                    <td data-col="state"><Badge tone={nodeStateTone(node.state)}>{t(`nodeState.${node.state}`, { defaultValue: node.state ?? "" })}</Badge></td>
                    <td data-col="pool">{node.pool_name ?? "—"}</td>
                    <td>{t(`deliveryForm.${node.delivery_form}`)}</td>
                    <td>{t(`billingMode.${node.billing_mode}`, { defaultValue: node.billing_mode ?? "" })}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {nodes.data.results.length === 0 ? <Empty>{t("nodes.none")}</Empty> : null}
          <Pagination page={page} pageSize={PAGE_SIZE} count={nodes.data.count} label={t("nodes.pagination")}
            onPage={(next) => setFilters({ page: next }, { resetPage: false })} />
        </>
      ) : null}
    </div>
  );
}
