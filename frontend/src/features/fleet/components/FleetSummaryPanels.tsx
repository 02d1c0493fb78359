import { useTranslation } from "react-i18next";
import { Link } from "react-router";
import { formatNumber } from "@/shared/lib/format";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import { summaryBreakdowns, useFleetSummary, type Breakdown, type BreakdownEntry } from "../api/getFleetSummary";

const VALUE_PREFIX: Record<Breakdown["name"], string | null> = {
  state: "nodeState",
  delivery_form: "deliveryForm",
  billing_mode: "billingMode",
  provider: null,
};

function BreakdownBars({ breakdown }: { breakdown: Breakdown }) {
  const { t } = useTranslation();
  const max = Math.max(1, ...breakdown.entries.map((e) => e.count));
  const prefix = VALUE_PREFIX[breakdown.name];
  const label = (entry: BreakdownEntry) =>
    entry.value === "none" ? t("overview.none") : prefix ? t(`${prefix}.${entry.value}`, { defaultValue: entry.value }) : entry.value;
  const title = t(`overview.by.${breakdown.name}`);
  return (
    <Panel title={title} testId={`breakdown-${breakdown.name}`}>
      {breakdown.entries.length === 0 ? <p className="muted">{t("state.empty")}</p> : (
        <ul className="bars" aria-label={title}>
          {breakdown.entries.map((entry) => (
            <li key={entry.value} className="bars__row">
              <span className="bars__label">
                {entry.filter ? <Link to={`/nodes?${new URLSearchParams(entry.filter)}`}>{label(entry)}</Link> : label(entry)}
              </span>
              <span className="bars__track" aria-hidden="true"><span className="bars__fill" style={{ width: `${(entry.count / max) * 100}%` }} /></span>
              <span className="bars__count">{formatNumber(entry.count)}</span>
            </li>
          ))}
        </ul>
      )}
    </Panel>
  );
}

function Stat({ value, label, bad = false, to }: { value: number; label: string; bad?: boolean; to?: string }) {
  const body = (
    <>
      <span className="stat__value">{formatNumber(value)}</span>
      <span className="stat__label">{label}</span>
    </>
  );
  return to ? (
    <Link className={`stat${bad ? " stat--bad" : ""}`} to={to}>{body}</Link>
  ) : (
    <div className={`stat${bad ? " stat--bad" : ""}`}>{body}</div>
  );
}

export function FleetSummaryPanels() {
  const { t } = useTranslation();
  const summary = useFleetSummary();
  return (
    <QueryState query={summary} what={t("overview.title")}>
      {(data) => (
        <>
          <div className="stat-row" data-testid="fleet-stats">
            <Stat value={data.nodes} label={t("overview.nodes")} />
            <Stat value={data.gpus} label={t("overview.gpus")} />
            <Stat value={data.reporting} label={t("overview.reporting")} />
            <Stat value={data.silent} label={t("overview.silent")} bad={data.silent > 0} to="/nodes?silent=true" />
            {data.nvml_unavailable ? <Stat value={data.nvml_unavailable} label={t("overview.nvmlUnavailable")} bad /> : null}
          </div>
          <div className="grid grid--breakdowns">
            {summaryBreakdowns(data).map((breakdown) => <BreakdownBars key={breakdown.name} breakdown={breakdown} />)}
          </div>
        </>
      )}
    </QueryState>
  );
}
