import { useTranslation } from "react-i18next";
import { Link } from "react-router";
import { formatMoney, formatNumber } from "@/shared/lib/format";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import { useCostReport } from "../api/billing";

/** Monthly cost per currency, the most expensive nodes, and how many nodes nothing prices yet. */
export function CostSummary() {
  const { t } = useTranslation();
  const report = useCostReport();
  return (
    <Panel title={t("overview.cost")} testId="cost-summary">
      <QueryState query={report} what={t("overview.cost")}>
        {(data) => {
          const priced = data.rows.filter((row) => row.total != null)
            .sort((a, b) => Number(b.total) - Number(a.total)).slice(0, 5);
          return (
            <>
              {data.totals.length ? data.totals.map((total) => (
                <p key={total.currency} className="big-number">
                  {formatMoney(total.total, total.currency)} <span className="muted small">{t("overview.perMonth")}</span>
                  {total.tco_per_gpu_hour != null ? (
                    <span className="muted small"> · {t("overview.perGpuHour", { value: formatMoney(total.tco_per_gpu_hour, total.currency) })}</span>
                  ) : null}
                </p>
              )) : <p className="muted">{t("overview.noCost")}</p>}
              {data.unpriced_nodes ? <p className="muted small">{t("overview.unpriced", { count: data.unpriced_nodes })}</p> : null}
              {priced.length ? (
                <table className="table table--compact">
                  <caption className="visually-hidden">{t("overview.topCost")}</caption>
                  <tbody>
                    {priced.map((row) => (
                      <tr key={row.node_id}>
                        <th scope="row"><Link to={`/nodes/${row.node_id}`}>{row.hostname}</Link></th>
                        <td>{row.pool ?? row.provider}</td>
                        <td>{formatNumber(row.gpu_count)} GPU</td>
                        <td>{formatMoney(row.total, row.currency ?? "USD")}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              ) : null}
            </>
          );
        }}
      </QueryState>
    </Panel>
  );
}
