import { useTranslation } from "react-i18next";
import { Link } from "react-router";
import { usePools } from "@/shared/api/lookups";
import { useUrlState } from "@/shared/hooks/useUrlState";
import { FINDING_STATES, LAYERS_TOP_DOWN, OWNERS, SEVERITIES, TRIAGE_STEPS } from "@/shared/lib/domain";
import { formatRelative } from "@/shared/lib/format";
import { choiceParam, intParam } from "@/shared/lib/params";
import { Badge, severityTone } from "@/shared/ui/Badge";
import { Pagination } from "@/shared/ui/Pagination";
import { QueryState } from "@/shared/ui/QueryState";
import { useFindings } from "../api/getFindings";
import { findingTitle } from "../types/findings";

const KEYS = ["node", "pool", "severity", "step", "layer", "responsible_party", "state", "page"] as const;
const PAGE_SIZE = 50;

export function FindingsPage() {
  const { t } = useTranslation();
  const [filters, setFilters] = useUrlState(KEYS);
  const pools = usePools();
  const page = Math.max(1, Number(filters.page) || 1);
  // "open" unless the user picked another state ("any" shows all).
  const state = filters.state === "any" ? undefined : choiceParam(FINDING_STATES, filters.state || "open");
  const findings = useFindings({
    page,
    page_size: PAGE_SIZE,
    node: intParam(filters.node),
    pool: intParam(filters.pool),
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
        {filters.node ? (
          <button type="button" className="btn btn--link" onClick={() => setFilters({ node: null })}>
            {t("findings.clearNode", { node: filters.node })}
          </button>
        ) : null}
      </form>
      <QueryState query={findings} what={t("findings.title")} isEmpty={(d) => d.results.length === 0} empty={t("findings.none")}>
        {(data) => (
          <>
            <div className="table-wrap" aria-busy={findings.isFetching}>
              <table className="table" data-testid="findings-table">
                <caption className="visually-hidden">{t("findings.title")}</caption>
                <thead>
                  <tr>
                    <th scope="col">{t("findings.severity")}</th>
                    <th scope="col">{t("findings.finding")}</th>
                    <th scope="col">{t("findings.node")}</th>
                    <th scope="col">{t("findings.step")}</th>
                    <th scope="col">{t("findings.layer")}</th>
                    <th scope="col">{t("findings.responsible")}</th>
                    <th scope="col">{t("findings.lastSeen")}</th>
                  </tr>
                </thead>
                <tbody>
                  {data.results.map((finding) => (
                    <tr key={finding.id}>
                      <td><Badge tone={severityTone(finding.severity)}>{t(`severity.${finding.severity}`, { defaultValue: finding.severity })}</Badge></td>
                      <td>
                        <strong>{findingTitle(finding)}</strong>
                        {finding.recommended_action ? <div className="muted small">{finding.recommended_action}</div> : null}
                      </td>
                      <td><Link to={`/nodes/${finding.node}`}>{finding.hostname || `#${finding.node}`}</Link></td>
                      <td>{t(`step.${finding.step}`, { defaultValue: finding.step })}</td>
                      <td>{t(`layer.${finding.layer}`, { defaultValue: finding.layer })}</td>
                      <td>{finding.responsible_party ? t(`owner.${finding.responsible_party}`, { defaultValue: finding.responsible_party }) : "—"}</td>
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
