// The Incidents page: open incidents in four queues (waiting for a slot, in flight, waiting for approval,
// waiting for the provider), or the closed ones; filters live in the URL.
import { useTranslation } from "react-i18next";
import { Link } from "react-router";
import { usePools } from "@/shared/api/lookups";
import { useUrlState } from "@/shared/hooks/useUrlState";
import { OWNERS } from "@/shared/lib/domain";
import { formatRelative } from "@/shared/lib/format";
import { choiceParam, intParam } from "@/shared/lib/params";
import { Panel } from "@/shared/ui/Panel";
import { Empty, QueryState } from "@/shared/ui/QueryState";
import { useIncidents } from "../api/incidents";
import { INCIDENT_GROUPS, incidentGroup, type Incident } from "../types/incidents";
import { IncidentStateBadge, StepLabel } from "./IncidentParts";

const KEYS = ["pool", "party", "cause", "closed"] as const;
const CAUSES = ["xid", "rule", "preemption", "manual", "mass_failure"] as const;

function IncidentTable({ incidents, testId }: { incidents: Incident[]; testId: string }) {
  const { t } = useTranslation();
  if (incidents.length === 0) return <Empty>{t("incidents.noneHere")}</Empty>;
  return (
    <div className="table-wrap">
      <table className="table table--compact" data-testid={testId}>
        <thead>
          <tr>
            <th scope="col">{t("incidents.incident")}</th>
            <th scope="col">{t("incidents.node")}</th>
            <th scope="col">{t("incidents.state")}</th>
            <th scope="col">{t("incidents.workflow")}</th>
            <th scope="col">{t("incidents.responsible")}</th>
            <th scope="col">{t("incidents.opened")}</th>
          </tr>
        </thead>
        <tbody>
          {incidents.map((incident) => (
            <tr key={incident.id}>
              <td>
                <Link to={`/incidents/${incident.id}`}>{incident.key}</Link>
                <div className="small">{incident.title}</div>
              </td>
              <td>{incident.node ? <Link to={`/nodes/${incident.node}`}>{incident.hostname}</Link> : incident.pool_name ?? "—"}</td>
              <td>
                <IncidentStateBadge incident={incident} />
                {incident.state_reason ? <div className="muted small">{incident.state_reason}</div> : null}
              </td>
              <td>{incident.workflow}<div className="muted small"><StepLabel incident={incident} /></div></td>
              <td>{incident.responsible_party ? t(`owner.${incident.responsible_party}`, { defaultValue: incident.responsible_party }) : "—"}</td>
              <td title={incident.opened_at}>{formatRelative(incident.opened_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function IncidentsPage() {
  const { t } = useTranslation();
  const [filters, setFilters] = useUrlState(KEYS);
  const pools = usePools();
  const closed = filters.closed === "1";
  const incidents = useIncidents({
    open: !closed,
    page_size: 200,
    pool: intParam(filters.pool),
    party: choiceParam(OWNERS, filters.party),
    cause: choiceParam(CAUSES, filters.cause),
  });

  const select = (key: (typeof KEYS)[number], label: string, options: Array<[string, string]>) => (
    <label className="field">
      <span>{label}</span>
      <select value={filters[key]} onChange={(e) => setFilters({ [key]: e.target.value })}>
        <option value="">{t("filter.all")}</option>
        {options.map(([value, text]) => <option key={value} value={value}>{text}</option>)}
      </select>
    </label>
  );

  return (
    <div className="page">
      <h1>{t("incidents.title")}</h1>
      <form className="filters" aria-label={t("incidents.filtersLabel")} onSubmit={(e) => e.preventDefault()}>
        <label className="field">
          <span>{t("incidents.show")}</span>
          <select value={closed ? "1" : ""} onChange={(e) => setFilters({ closed: e.target.value || null })}>
            <option value="">{t("incidents.showOpen")}</option>
            <option value="1">{t("incidents.showClosed")}</option>
          </select>
        </label>
        {select("pool", t("nodes.col.pool"), (pools.data ?? []).map((p) => [String(p.id), p.name]))}
        {select("party", t("incidents.responsible"), OWNERS.map((o) => [o, t(`owner.${o}`)]))}
        {select("cause", t("incidents.cause"), CAUSES.map((c) => [c, t(`cause.${c}`)]))}
      </form>
      <QueryState query={incidents} what={t("incidents.title")}>
        {(data) => closed ? (
          <Panel title={t("incidents.closed")}><IncidentTable incidents={data.results} testId="incidents-closed" /></Panel>
        ) : (
          <>
            {INCIDENT_GROUPS.map((group) => {
              const rows = data.results.filter((incident) => incidentGroup(incident) === group);
              return (
                <Panel key={group} title={`${t(`incidentGroup.${group}`)} (${rows.length})`} testId={`incidents-${group}`}>
                  <IncidentTable incidents={rows} testId={`incidents-table-${group}`} />
                </Panel>
              );
            })}
          </>
        )}
      </QueryState>
    </div>
  );
}
