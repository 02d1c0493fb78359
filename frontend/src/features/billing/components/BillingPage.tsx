// Billing and cost: the cost report with its CSV download, a pool's what-if scenarios side by side, reserved
// terms about to end, and preemption rates and records.
import { useState, type FormEvent } from "react";
import { useTranslation } from "react-i18next";
import { Link } from "react-router";
import { ApiError } from "@/shared/api/client";
import { formatDateTime, formatMoney, formatNumber, formatPercent } from "@/shared/lib/format";
import { Badge } from "@/shared/ui/Badge";
import { FieldError } from "@/shared/ui/FieldError";
import { Pagination } from "@/shared/ui/Pagination";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import {
  costReportCsvUrl,
  PREEMPTIONS_PAGE_SIZE,
  useCostReportFor,
  useExpiringTerms,
  usePoolWhatIf,
  usePools,
  usePreemptionRates,
  usePreemptionRecords,
  type WhatIfInput,
} from "../api/billingPage";

const num = (value: string | null | undefined) => (value === null || value === undefined ? null : Number(value));

export function BillingPage() {
  const { t } = useTranslation();
  return (
    <div className="page" data-testid="billing-page">
      <h1>{t("billingPage.title")}</h1>
      <CostReportPanel />
      <WhatIfPanel />
      <div className="grid grid--two">
        <ExpiringTermsPanel />
        <PreemptionRatesPanel />
      </div>
      <PreemptionRecordsPanel />
    </div>
  );
}

function CostReportPanel() {
  const { t } = useTranslation();
  const [period, setPeriod] = useState(30);
  const report = useCostReportFor(period);
  return (
    <Panel title={t("billingPage.costReport")} testId="cost-report"
      actions={(
        <>
          <label className="field field--inline">
            <span>{t("billingPage.utilisationOver")}</span>
            <select value={period} onChange={(e) => setPeriod(Number(e.target.value))}>
              {[7, 30, 90].map((d) => <option key={d} value={d}>{t("trends.lastDays", { count: d })}</option>)}
            </select>
          </label>
          <a className="btn btn--small" href={costReportCsvUrl(period)} download data-testid="cost-csv">{t("billingPage.downloadCsv")}</a>
        </>
      )}>
      <QueryState query={report} what={t("billingPage.costReport")}>
        {(data) => (
          <>
            <ul className="totals" data-testid="cost-totals">
              {data.totals.map((total) => (
                <li key={total.currency}>
                  <strong>{formatMoney(total.total, total.currency)}</strong>{" "}
                  <span className="muted">{t("billingPage.totalLine", { nodes: total.nodes, gpus: total.gpu_count, perGpuHour: formatMoney(total.tco_per_gpu_hour, total.currency) })}</span>
                </li>
              ))}
              {data.unpriced_nodes ? <li><Badge tone="warn">{t("billingPage.unpriced", { count: data.unpriced_nodes })}</Badge></li> : null}
            </ul>
            <div className="table-wrap">
              <table className="table table--compact">
                <caption className="visually-hidden">{t("billingPage.costReport")}</caption>
                <thead>
                  <tr>
                    <th scope="col">{t("billingPage.node")}</th>
                    <th scope="col">{t("billingPage.provider")}</th>
                    <th scope="col">{t("billingPage.pool")}</th>
                    <th scope="col">{t("billingPage.mode")}</th>
                    <th scope="col" className="num">{t("billingPage.gpus")}</th>
                    <th scope="col" className="num">{t("billing.monthly")}</th>
                    <th scope="col" className="num">{t("billing.perGpuHour")}</th>
                    <th scope="col" className="num">{t("billing.utilisation")}</th>
                    <th scope="col" className="num">{t("billing.perUtilisedGpuHour")}</th>
                  </tr>
                </thead>
                <tbody>
                  {data.rows.map((row) => (
                    <tr key={row.node_id} data-testid="cost-row">
                      <td><Link to={`/nodes/${row.node_id}`}>{row.hostname}</Link></td>
                      <td>{row.provider}</td>
                      <td>{row.pool ?? "—"}</td>
                      <td>{t(`billingMode.${row.billing_mode}`)}</td>
                      <td className="num">{row.gpu_count}</td>
                      <td className="num">{row.currency ? formatMoney(row.total, row.currency) : "—"}</td>
                      <td className="num">{row.currency ? formatMoney(row.tco_per_gpu_hour, row.currency) : "—"}</td>
                      <td className="num">{formatPercent(num(row.utilisation_pct), 1)}</td>
                      <td className="num">{row.currency ? formatMoney(row.tco_per_utilised_gpu_hour, row.currency) : "—"}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </>
        )}
      </QueryState>
    </Panel>
  );
}

function WhatIfPanel() {
  const { t } = useTranslation();
  const pools = usePools();
  const [poolId, setPoolId] = useState<number | null>(null);
  const [draft, setDraft] = useState<WhatIfInput>({ spotRate: "", bareMetalPrice: "" });
  const [input, setInput] = useState<WhatIfInput>(draft);
  const whatIf = usePoolWhatIf(poolId, input);
  const fields = whatIf.error instanceof ApiError ? whatIf.error.fields : {};
  const submit = (event: FormEvent) => { event.preventDefault(); setInput(draft); };
  return (
    <Panel title={t("billingPage.whatIf")} testId="what-if">
      <form className="form-grid" onSubmit={submit} aria-label={t("billingPage.whatIf")}>
        <label className="field">
          <span>{t("billingPage.pool")}</span>
          <select value={poolId ?? ""} onChange={(e) => setPoolId(e.target.value ? Number(e.target.value) : null)} data-testid="what-if-pool">
            <option value="">{t("billingPage.choosePool")}</option>
            {(pools.data ?? []).map((pool) => <option key={pool.id} value={pool.id}>{pool.name}</option>)}
          </select>
        </label>
        <label className="field">
          <span>{t("billingPage.spotRate")}</span>
          <input inputMode="decimal" value={draft.spotRate} placeholder={t("billingPage.measured")}
            onChange={(e) => setDraft({ ...draft, spotRate: e.target.value })} aria-invalid={Boolean(fields.spot_preemption_rate) || undefined} />
          <FieldError errors={fields.spot_preemption_rate} />
        </label>
        <label className="field">
          <span>{t("billingPage.bareMetalPrice")}</span>
          <input inputMode="numeric" value={draft.bareMetalPrice} placeholder={t("billingPage.fromProfile")}
            onChange={(e) => setDraft({ ...draft, bareMetalPrice: e.target.value })} aria-invalid={Boolean(fields.bare_metal_price) || undefined} />
          <FieldError errors={fields.bare_metal_price} />
        </label>
        <div className="form-grid__actions">
          <button type="submit" className="btn btn--primary" disabled={poolId === null}>{t("billingPage.compare")}</button>
        </div>
      </form>
      {poolId === null ? <p className="muted">{t("billingPage.choosePoolHint")}</p> : (
        whatIf.isError && Object.keys(fields).length ? null : (
          <QueryState query={whatIf} what={t("billingPage.whatIf")}>
            {(data) => (
              <>
                <p className="small muted">{t("billingPage.whatIfBasis", { nodes: data.node_count, gpus: data.gpus_per_node, rate: data.preemptions_per_node_day ?? "—", basis: data.preemption_rate_basis })}</p>
                <div className="scenarios" data-testid="what-if-scenarios">
                  {data.scenarios.map((scenario) => (
                    <article key={scenario.scenario} className={`scenario${scenario.scenario === "current" ? " scenario--current" : ""}`} data-testid="scenario">
                      <h3>{scenario.label}</h3>
                      {scenario.available && scenario.currency ? (
                        <dl className="kv">
                          <dt>{t("billingPage.monthlyTotal")}</dt><dd><strong>{formatMoney(scenario.total_monthly, scenario.currency)}</strong></dd>
                          <dt>{t("billingPage.perNode")}</dt><dd>{formatMoney(scenario.total_per_node, scenario.currency)}</dd>
                          <dt>{t("billing.perGpuHour")}</dt><dd>{formatMoney(scenario.tco_per_gpu_hour, scenario.currency)}</dd>
                          <dt>{t("billingPage.preemptionLoss")}</dt><dd>{formatMoney(scenario.preemption_loss_per_node, scenario.currency)}</dd>
                          <dt>{t("billingPage.vsCurrent")}</dt><dd>{scenario.difference_vs_current == null ? "—" : formatMoney(scenario.difference_vs_current, scenario.currency)}</dd>
                        </dl>
                      ) : <p className="muted">{t("billingPage.unavailable")}</p>}
                      {scenario.notes.length ? <ul className="small muted">{scenario.notes.map((note) => <li key={note}>{note}</li>)}</ul> : null}
                    </article>
                  ))}
                </div>
              </>
            )}
          </QueryState>
        )
      )}
    </Panel>
  );
}

function ExpiringTermsPanel() {
  const { t } = useTranslation();
  const [within, setWithin] = useState(90);
  const terms = useExpiringTerms(within);
  return (
    <Panel title={t("billingPage.expiringTerms")} testId="expiring-terms"
      actions={(
        <label className="field field--inline">
          <span>{t("billingPage.within")}</span>
          <select value={within} onChange={(e) => setWithin(Number(e.target.value))}>
            {[30, 90, 180, 365].map((d) => <option key={d} value={d}>{t("billingPage.days", { count: d })}</option>)}
          </select>
        </label>
      )}>
      <QueryState query={terms} what={t("billingPage.expiringTerms")} isEmpty={(d) => d.length === 0} empty={t("billingPage.noTerms")}>
        {(rows) => (
          <div className="table-wrap">
            <table className="table table--compact">
              <caption className="visually-hidden">{t("billingPage.expiringTerms")}</caption>
              <thead><tr>
                <th scope="col">{t("billingPage.scope")}</th><th scope="col">{t("billingPage.termEnd")}</th>
                <th scope="col" className="num">{t("billingPage.daysLeft")}</th><th scope="col">{t("billingPage.autoRenew")}</th>
              </tr></thead>
              <tbody>
                {rows.map((row) => (
                  <tr key={row.plan_id}>
                    <td>{row.scope === "pool" ? row.pool_name : row.node_id ? <Link to={`/nodes/${row.node_id}`}>{row.hostname}</Link> : row.hostname}</td>
                    <td>{row.term_end}</td>
                    <td className="num"><Badge tone={row.days_left <= 14 ? "bad" : "warn"}>{row.days_left}</Badge></td>
                    <td>{row.auto_renew ? t("common.yes") : t("common.no")}</td>
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

function PreemptionRatesPanel() {
  const { t } = useTranslation();
  const [groupBy, setGroupBy] = useState<"pool" | "site" | "instance_type">("pool");
  const rates = usePreemptionRates(groupBy);
  return (
    <Panel title={t("billingPage.preemptionRates")} testId="preemption-rates"
      actions={(
        <label className="field field--inline">
          <span>{t("billingPage.groupBy")}</span>
          <select value={groupBy} onChange={(e) => setGroupBy(e.target.value as typeof groupBy)}>
            {(["pool", "site", "instance_type"] as const).map((g) => <option key={g} value={g}>{t(`billingPage.group.${g}`)}</option>)}
          </select>
        </label>
      )}>
      <QueryState query={rates} what={t("billingPage.preemptionRates")} isEmpty={(d) => d.length === 0} empty={t("trends.noPreemptionData")}>
        {(rows) => (
          <div className="table-wrap">
            <table className="table table--compact">
              <caption className="visually-hidden">{t("billingPage.preemptionRates")}</caption>
              <thead><tr>
                <th scope="col">{t(`billingPage.group.${groupBy}`)}</th>
                <th scope="col" className="num">{t("billingPage.rate7")}</th><th scope="col" className="num">{t("billingPage.rate30")}</th>
                <th scope="col" className="num">{t("billingPage.preemptions30")}</th><th scope="col" className="num">{t("billingPage.lostHours30")}</th>
              </tr></thead>
              <tbody>
                {rows.map((row) => (
                  <tr key={row.key} data-testid="rate-row">
                    <td>{row.name || row.key}</td>
                    <td className="num">{formatNumber(num(row.last_7d.rate_per_node_day), 3)}</td>
                    <td className="num">{formatNumber(num(row.last_30d.rate_per_node_day), 3)}</td>
                    <td className="num">{row.last_30d.preemptions}</td>
                    <td className="num">{formatNumber(num(row.last_30d.lost_gpu_hours), 1)}</td>
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

function PreemptionRecordsPanel() {
  const { t } = useTranslation();
  const [page, setPage] = useState(1);
  const records = usePreemptionRecords(page);
  return (
    <Panel title={t("billingPage.preemptionRecords")} testId="preemption-records">
      <QueryState query={records} what={t("billingPage.preemptionRecords")} isEmpty={(d) => d.count === 0} empty={t("billing.noPreemptions")}>
        {(data) => (
          <>
            <div className="table-wrap">
              <table className="table table--compact">
                <caption className="visually-hidden">{t("billingPage.preemptionRecords")}</caption>
                <thead><tr>
                  <th scope="col">{t("billing.when")}</th><th scope="col">{t("billingPage.node")}</th><th scope="col">{t("billingPage.pool")}</th>
                  <th scope="col">{t("billing.source")}</th><th scope="col">{t("billing.leadTime")}</th><th scope="col">{t("billing.checkpoint")}</th>
                  <th scope="col" className="num">{t("billing.workLost")}</th>
                </tr></thead>
                <tbody>
                  {data.results.map((row) => (
                    <tr key={row.id}>
                      <td><time dateTime={row.at}>{formatDateTime(row.at)}</time></td>
                      <td><Link to={`/nodes/${row.node}`}>{row.hostname}</Link></td>
                      <td>{row.pool_name ?? "—"}</td>
                      <td>{t(`preemptionSource.${row.source}`, { defaultValue: String(row.source) })}</td>
                      <td>{row.notice_lead_time_s == null ? t("billing.noNotice") : `${formatNumber(row.notice_lead_time_s)} s`}</td>
                      <td>{row.checkpoint_fresh == null ? "—" : <Badge tone={row.checkpoint_fresh ? "good" : "bad"}>{row.checkpoint_fresh ? t("billing.fresh") : t("billing.stale")}</Badge>}</td>
                      <td className="num">{t("billing.gpuHours", { value: formatNumber(num(row.lost_gpu_hours), 1) })}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            <Pagination page={page} pageSize={PREEMPTIONS_PAGE_SIZE} count={data.count} onPage={setPage} label={t("billingPage.preemptionRecords")} />
          </>
        )}
      </QueryState>
    </Panel>
  );
}
