import { useEffect, useState } from "react";
import { useTranslation } from "react-i18next";
import { Link } from "react-router";
import { usePools, useProviders } from "@/shared/api/lookups";
import { useDebounced } from "@/shared/hooks/useDebounced";
import { useUrlState } from "@/shared/hooks/useUrlState";
import { BILLING_MODES, DELIVERY_FORMS, NODE_STATES } from "@/shared/lib/domain";
import { formatRelative } from "@/shared/lib/format";
import { boolParam, choiceParam, intParam } from "@/shared/lib/params";
import { Badge, nodeStateTone } from "@/shared/ui/Badge";
import { Pagination } from "@/shared/ui/Pagination";
import { Empty, ErrorState, Loading } from "@/shared/ui/QueryState";
import { useNodes } from "../api/getNodes";

const FILTER_KEYS = ["search", "provider", "provider_slug", "pool", "delivery_form", "billing_mode", "state", "silent", "label", "ordering", "page"] as const;
const PAGE_SIZE = 50;

const SORTABLE = [
  { field: "hostname", label: "nodes.col.hostname" },
  { field: "state", label: "nodes.col.state" },
  { field: "delivery_form", label: "nodes.col.deliveryForm" },
  { field: "billing_mode", label: "nodes.col.billingMode" },
  { field: "updated_at", label: "nodes.col.updated" },
] as const;

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
  const ordering = filters.ordering || "hostname";
  const nodes = useNodes({
    page,
    page_size: PAGE_SIZE,
    search: filters.search || undefined,
    ordering,
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
  const ariaSort = (field: string): "ascending" | "descending" | "none" =>
    ordering === field ? "ascending" : ordering === `-${field}` ? "descending" : "none";
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
            setFilters({ search: null, provider: null, provider_slug: null, pool: null, delivery_form: null, billing_mode: null, state: null, label: null });
          }}>
            {t("filter.clear")}
          </button>
        ) : null}
      </form>

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
                  {SORTABLE.slice(0, 1).map((col) => (
                    <th key={col.field} scope="col" aria-sort={ariaSort(col.field)}>
                      <button type="button" className="sort" onClick={() => sortBy(col.field)}>{t(col.label)}</button>
                    </th>
                  ))}
                  <th scope="col">{t("nodes.col.provider")}</th>
                  <th scope="col">{t("nodes.col.pool")}</th>
                  {SORTABLE.slice(1).map((col) => (
                    <th key={col.field} scope="col" aria-sort={ariaSort(col.field)}>
                      <button type="button" className="sort" onClick={() => sortBy(col.field)}>{t(col.label)}</button>
                    </th>
                  ))}
                  <th scope="col">{t("nodes.col.gpus")}</th>
                </tr>
              </thead>
              <tbody>
                {nodes.data.results.map((node) => (
                  <tr key={node.id} data-testid="node-row">
                    <td><Link to={`/nodes/${node.id}`}>{node.hostname}</Link></td>
                    <td>{node.provider_name}</td>
                    <td>{node.pool_name ?? "—"}</td>
                    <td><Badge tone={nodeStateTone(node.state)}>{t(`nodeState.${node.state}`, { defaultValue: node.state ?? "" })}</Badge></td>
                    <td>{t(`deliveryForm.${node.delivery_form}`)}</td>
                    <td>{t(`billingMode.${node.billing_mode}`, { defaultValue: node.billing_mode ?? "" })}</td>
                    <td title={node.updated_at}>{formatRelative(node.updated_at)}</td>
                    <td>{node.expected_gpu_count ? `${node.expected_gpu_count} × ${node.expected_gpu_model || "GPU"}` : "—"}</td>
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
