// Fleet-wide charts: what people would rather look at than read. Utilisation and healthy-GPU share, open
// findings by triage step, Xid events per day by code, preemption rate per spot pool and day, cost per month and per
// utilised GPU-hour, and the provider scorecard. The range is in the URL (?range=7d) like every filter.
import { useState } from "react";
import { useTranslation } from "react-i18next";
import { formatMoney, formatNumber, formatPercent } from "@/shared/lib/format";
import { trendColumns } from "@/shared/lib/trend";
import { useUrlState } from "@/shared/hooks/useUrlState";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import { asRange, RangePicker } from "@/shared/ui/RangePicker";
import { TimeChart } from "@/shared/ui/TimeChart";
import {
  useCostHistory,
  useFindingTrend,
  useFleetUtilisation,
  usePoolPreemptionDaily,
  useProviderScorecard,
  useXidDaily,
} from "../api/trends";

const STEPS = ["visibility", "software_chain", "capacity", "platform_hardware"] as const;
const STEP_COLORS = ["#c0392b", "#d68910", "#2f6fb3", "#7d3c98"];
const PALETTE = ["#2f6fb3", "#c0392b", "#27ae60", "#d68910", "#7d3c98", "#16a085", "#7f8c8d", "#e84393", "#34495e", "#a0522d"];

function dayStart(iso: string): number {
  return Date.parse(`${iso}T00:00:00Z`) / 1000;
}

export function FleetTrendsPage() {
  const { t } = useTranslation();
  const [url, setUrl] = useUrlState(["range"] as const);
  const range = asRange(url.range);
  return (
    <div className="page" data-testid="trends-page">
      <header className="page__header">
        <h1>{t("trends.title")}</h1>
        <RangePicker value={range} onChange={(next) => setUrl({ range: next })} testId="trends-range" />
      </header>
      <p className="muted">{t("trends.intro")}</p>
      <div className="grid grid--two">
        <UtilisationPanel range={range} />
        <FindingsPanel range={range} />
      </div>
      <XidPanel />
      <div className="grid grid--two">
        <PreemptionPanel />
        <CostPanel />
      </div>
      <ScorecardPanel />
    </div>
  );
}

function UtilisationPanel({ range }: { range: ReturnType<typeof asRange> }) {
  const { t } = useTranslation();
  const utilisation = useFleetUtilisation(range);
  const findings = useFindingTrend(range);
  return (
    <Panel title={t("trends.utilisation")} testId="trend-utilisation">
      <QueryState query={utilisation} what={t("trends.utilisation")}>
        {(data) => {
          const columns = trendColumns(data);
          return (
            <TimeChart testId="chart-utilisation" label={t("trends.utilisation")} times={columns.times} yMin={0} yMax={100}
              format={(v) => formatPercent(v)}
              lines={[{ label: t("trends.gpuUtil"), color: "#2f6fb3", values: columns.values.utilisation_pct ?? [] }]} />
          );
        }}
      </QueryState>
      <h3 className="panel__subtitle">{t("trends.healthyShare")}</h3>
      <QueryState query={findings} what={t("trends.healthyShare")}>
        {(data) => {
          const columns = trendColumns(data);
          const share = (columns.values.healthy_gpu_share ?? []).map((v) => (v === null ? null : v * 100));
          return (
            <TimeChart testId="chart-healthy" label={t("trends.healthyShare")} times={columns.times} yMin={0} yMax={100}
              format={(v) => formatPercent(v, 1)} lines={[{ label: t("trends.healthyGpus"), color: "#27ae60", values: share }]} />
          );
        }}
      </QueryState>
    </Panel>
  );
}

function FindingsPanel({ range }: { range: ReturnType<typeof asRange> }) {
  const { t } = useTranslation();
  const findings = useFindingTrend(range);
  return (
    <Panel title={t("trends.findingsByStep")} testId="trend-findings">
      <QueryState query={findings} what={t("trends.findingsByStep")}>
        {(data) => {
          const columns = trendColumns(data);
          return (
            <TimeChart testId="chart-findings" label={t("trends.findingsByStep")} times={columns.times} height={260}
              format={(v) => formatNumber(v)} stack integer
              lines={STEPS.map((step, index) => ({ label: t(`step.${step}`), color: STEP_COLORS[index], bars: true,
                values: columns.values[`open.${step}`] ?? [] }))} />
          );
        }}
      </QueryState>
    </Panel>
  );
}

function XidPanel() {
  const { t } = useTranslation();
  const [days, setDays] = useState<7 | 30 | 90>(30);
  const xid = useXidDaily(days);
  return (
    <Panel title={t("trends.xidPerDay")} testId="trend-xid"
      actions={(
        <label className="field field--inline">
          <span>{t("trends.days")}</span>
          <select value={days} onChange={(e) => setDays(Number(e.target.value) as 7 | 30 | 90)}>
            {[7, 30, 90].map((d) => <option key={d} value={d}>{t("trends.lastDays", { count: d })}</option>)}
          </select>
        </label>
      )}>
      <QueryState query={xid} what={t("trends.xidPerDay")} isEmpty={(d) => d.series.length === 0} empty={t("trends.noXid")}>
        {(data) => (
          <TimeChart testId="chart-xid" label={t("trends.xidPerDay")} times={data.days.map(dayStart)} stack integer
            format={(v) => formatNumber(v)} height={240}
            lines={data.series.map((row, index) => ({ label: `Xid ${row.code}`, color: PALETTE[index % PALETTE.length],
              bars: true, values: row.counts }))} />
        )}
      </QueryState>
    </Panel>
  );
}

function PreemptionPanel() {
  const { t } = useTranslation();
  const daily = usePoolPreemptionDaily(30);
  return (
    <Panel title={t("trends.preemptionRate")} testId="trend-preemption">
      <QueryState query={daily} what={t("trends.preemptionRate")} isEmpty={(d) => d.pools.length === 0} empty={t("trends.noPreemptionData")}>
        {(data) => {
          const times = data.days.map(dayStart);
          const sum = (values: (string | number)[]) => values.reduce<number>((total, v) => total + Number(v), 0);
          return (
            <>
              <TimeChart testId="chart-preemption" label={t("trends.preemptionPerNodeDay")} times={times} yMin={0} height={220}
                format={(v) => formatNumber(v, 3)}
                lines={data.pools.map((pool, index) => ({ label: pool.name || String(pool.pool_id), color: PALETTE[index % PALETTE.length],
                  values: pool.rate_per_node_day.map((v) => (v === null ? null : Number(v))) }))} />
              <ul className="small muted" data-testid="preemption-totals">
                {data.pools.map((pool) => (
                  <li key={pool.pool_id}>{t("trends.preemptionTotals", { name: pool.name || pool.pool_id,
                    count: sum(pool.preemptions), hours: formatNumber(sum(pool.node_hours), 0) })}</li>
                ))}
              </ul>
              <p className="small muted">{t("trends.preemptionNote")}</p>
            </>
          );
        }}
      </QueryState>
    </Panel>
  );
}

function CostPanel() {
  const { t } = useTranslation();
  const history = useCostHistory(12);
  return (
    <Panel title={t("trends.costPerMonth")} testId="trend-cost">
      <QueryState query={history} what={t("trends.costPerMonth")} isEmpty={(d) => d.length === 0} empty={t("trends.noCost")}>
        {(rows) => {
          const currencies = [...new Set(rows.map((r) => r.currency))];
          const months = [...new Set(rows.map((r) => r.month))].sort();
          // Months with days costed at today's prices (no daily record at the prices of the time).
          const estimated = months.filter((month) => rows.some((r) => r.month === month && r.estimated));
          const times = months.map((m) => Date.parse(`${m}-01T00:00:00Z`) / 1000);
          const pick = (currency: string, field: "total" | "per_utilised_gpu_hour") => months.map((month) => {
            const row = rows.find((r) => r.month === month && r.currency === currency);
            const value = row ? row[field] : null;
            return value === null || value === undefined ? null : Number(value);
          });
          // One pair of charts per currency: amounts in different currencies never share an axis.
          return (
            <>
              {currencies.map((currency, i) => (
                <div key={currency} data-testid="cost-currency">
                  {currencies.length > 1 ? <h3 className="panel__subtitle">{currency}</h3> : null}
                  <TimeChart testId={i === 0 ? "chart-cost" : `chart-cost-${currency}`} label={`${t("trends.costPerMonth")} (${currency})`}
                    times={times} height={180} yMin={0} format={(v) => formatMoney(v, currency)}
                    lines={[{ label: currency, color: PALETTE[i % PALETTE.length], bars: true, values: pick(currency, "total") }]} />
                  <h3 className="panel__subtitle">{t("trends.costPerUtilisedHour")} ({currency})</h3>
                  <TimeChart testId={i === 0 ? "chart-cost-utilised" : `chart-cost-utilised-${currency}`}
                    label={`${t("trends.costPerUtilisedHour")} (${currency})`} times={times} height={150} yMin={0}
                    format={(v) => formatMoney(v, currency)}
                    lines={[{ label: currency, color: PALETTE[i % PALETTE.length], values: pick(currency, "per_utilised_gpu_hour") }]} />
                </div>
              ))}
              {estimated.length > 0 ? (
                <p className="small" data-testid="cost-estimated">{t("trends.costEstimated", { months: estimated.join(", ") })}</p>
              ) : null}
              <p className="small muted">{t("trends.costNote")}</p>
            </>
          );
        }}
      </QueryState>
    </Panel>
  );
}

function ScorecardPanel() {
  const { t } = useTranslation();
  const [days, setDays] = useState<7 | 30 | 90>(30);
  const scorecard = useProviderScorecard(days);
  return (
    <Panel title={t("trends.scorecard")} testId="trend-scorecard"
      actions={(
        <label className="field field--inline">
          <span>{t("trends.days")}</span>
          <select value={days} onChange={(e) => setDays(Number(e.target.value) as 7 | 30 | 90)}>
            {[7, 30, 90].map((d) => <option key={d} value={d}>{t("trends.lastDays", { count: d })}</option>)}
          </select>
        </label>
      )}>
      <QueryState query={scorecard} what={t("trends.scorecard")} isEmpty={(d) => d.length === 0} empty={t("state.empty")}>
        {(rows) => {
          const max = Math.max(0, ...rows.map((r) => Number(r.findings_per_1k_gpu_days ?? 0)));
          return (
            <div className="table-wrap">
              <table className="table" data-testid="scorecard-table">
                <caption className="visually-hidden">{t("trends.scorecard")}</caption>
                <thead>
                  <tr>
                    <th scope="col">{t("trends.provider")}</th>
                    <th scope="col">{t("trends.supportContact")}</th>
                    <th scope="col" className="num">{t("trends.gpuDays")}</th>
                    <th scope="col" className="num">{t("trends.findings")}</th>
                    <th scope="col">{t("trends.findingsPer1k")}</th>
                    <th scope="col" className="num">{t("trends.providerFindingsPer1k")}</th>
                    <th scope="col" className="num">{t("trends.incidents")}</th>
                    <th scope="col" className="num">{t("trends.incidentsPer1k")}</th>
                  </tr>
                </thead>
                <tbody>
                  {rows.map((row) => {
                    const rate = Number(row.findings_per_1k_gpu_days ?? 0);
                    return (
                      <tr key={row.provider_id} data-testid="scorecard-row">
                        <th scope="row">{row.provider}</th>
                        <td>{row.support_contact || "—"}</td>
                        <td className="num">{formatNumber(Number(row.gpu_days), 1)}</td>
                        <td className="num">{formatNumber(row.findings)}</td>
                        <td className="bar-cell">
                          <span className="bar" style={{ width: `${max > 0 ? Math.max(1, Math.round((rate / max) * 100)) : 0}%` }} aria-hidden="true" />
                          <span className="bar__value">{row.findings_per_1k_gpu_days === null ? "—" : formatNumber(rate, 2)}</span>
                        </td>
                        <td className="num">{row.provider_findings_per_1k_gpu_days === null ? "—" : formatNumber(Number(row.provider_findings_per_1k_gpu_days), 2)}</td>
                        <td className="num">{formatNumber(row.incidents)}</td>
                        <td className="num">{row.incidents_per_1k_gpu_days === null ? "—" : formatNumber(Number(row.incidents_per_1k_gpu_days), 2)}</td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
            </div>
          );
        }}
      </QueryState>
    </Panel>
  );
}
