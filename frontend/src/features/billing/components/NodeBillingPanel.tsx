// What this node costs (by billing mode, amortised over a reserved term), its preemptions and compliance flags.
import type { ReactNode } from "react";
import { useTranslation } from "react-i18next";
import { formatDateTime, formatMoney, formatNumber, formatPercent } from "@/shared/lib/format";
import { Badge } from "@/shared/ui/Badge";
import { KeyValueList } from "@/shared/ui/KeyValueList";
import { Panel } from "@/shared/ui/Panel";
import { Empty, QueryState } from "@/shared/ui/QueryState";
import { useNodeBilling } from "../api/billing";
import type { NodeBilling } from "../types/billing";

export function NodeBillingView({ billing }: { billing: NodeBilling }) {
  const { t } = useTranslation();
  const { cost, preemptions, compliance_flags: flags } = billing;
  const plan = billing.billing.plan;
  const currency = cost.currency || plan?.currency || "USD";
  const money = (value: string | null | undefined) => (value == null ? "—" : formatMoney(value, currency));
  const items: Array<[string, ReactNode]> = [
    [t("nodes.col.billingMode"), t(`billingMode.${billing.billing.billing_mode}`)],
    [t("billing.rateSource"), t(`rateSource.${billing.billing.rate_source}`, { defaultValue: billing.billing.rate_source })],
  ];
  if (plan?.rate) items.push([t("billing.rate"), `${money(plan.rate)} / ${t(`rateUnit.${plan.rate_unit}`, { defaultValue: plan.rate_unit ?? "" })}`]);
  if (plan?.term_end) {
    items.push([t("billing.term"), `${formatDateTime(plan.term_start)} → ${formatDateTime(plan.term_end)}`]);
  }
  items.push(
    [t("billing.monthly"), <strong key="total">{money(cost.total)}</strong>],
    [t("billing.compute"), money(cost.compute)],
    [t("billing.other"), [cost.storage, cost.egress, cost.backup, cost.ops].some((v) => v != null)
      ? money(String([cost.storage, cost.egress, cost.backup, cost.ops].reduce((sum, v) => sum + Number(v ?? 0), 0)))
      : "—"],
    [t("billing.perGpuHour"), money(cost.tco_per_gpu_hour)],
    [t("billing.utilisation"), cost.utilisation_pct != null ? formatPercent(Number(cost.utilisation_pct), 1) : "—"],
    [t("billing.perUtilisedGpuHour"), money(cost.tco_per_utilised_gpu_hour)],
  );
  if (billing.billing.checkpoint_max_age_s != null) {
    items.push([t("billing.checkpointPolicy"), t("node.seconds", { count: billing.billing.checkpoint_max_age_s })]);
  }
  return (
    <>
      <KeyValueList items={items} />
      {cost.warnings.length ? (
        <ul className="notes">{cost.warnings.map((warning) => <li key={warning} className="muted small">{warning}</li>)}</ul>
      ) : null}
      {flags.length ? (
        <div className="status-line" aria-label={t("billing.compliance")}>
          {flags.map((flag) => <Badge key={flag.flag} tone="warn" title={flag.reason}>{flag.label}</Badge>)}
        </div>
      ) : null}
      <h3 className="subhead">{t("billing.preemptions")}</h3>
      {preemptions.length === 0 ? <Empty>{t("billing.noPreemptions")}</Empty> : (
        <table className="table table--compact" data-testid="preemptions">
          <caption className="visually-hidden">{t("billing.preemptions")}</caption>
          <thead>
            <tr>
              <th scope="col">{t("billing.when")}</th>
              <th scope="col">{t("billing.source")}</th>
              <th scope="col">{t("billing.leadTime")}</th>
              <th scope="col">{t("billing.checkpoint")}</th>
              <th scope="col">{t("billing.workLost")}</th>
            </tr>
          </thead>
          <tbody>
            {preemptions.map((p) => (
              <tr key={p.id}>
                <td>{formatDateTime(p.at)}</td>
                <td>{t(`preemptionSource.${p.source}`, { defaultValue: p.source })}</td>
                <td>{p.notice_lead_time_s != null ? t("node.seconds", { count: Math.round(p.notice_lead_time_s) }) : t("billing.noNotice")}</td>
                <td>{p.checkpoint_fresh == null ? "—" : p.checkpoint_fresh
                  ? <Badge tone="good">{t("billing.fresh")}</Badge> : <Badge tone="bad">{t("billing.stale")}</Badge>}</td>
                <td>{p.lost_gpu_hours != null ? t("billing.gpuHours", { value: formatNumber(Number(p.lost_gpu_hours), 1) }) : "—"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

export function NodeBillingPanel({ nodeId }: { nodeId: number }) {
  const { t } = useTranslation();
  const billing = useNodeBilling(nodeId);
  return (
    <Panel title={t("billing.title")} testId="billing-panel">
      <QueryState query={billing} what={t("billing.title")}>
        {(data) => <NodeBillingView billing={data} />}
      </QueryState>
    </Panel>
  );
}
