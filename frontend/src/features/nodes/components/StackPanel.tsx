// The node's software stack next to its pinned baseline; drifted fields are highlighted.
import { useTranslation } from "react-i18next";
import type { NodeDrift, SoftwareStack } from "@/shared/api/types";
import { formatDateTime, formatValue } from "@/shared/lib/format";
import { Badge } from "@/shared/ui/Badge";
import { Panel } from "@/shared/ui/Panel";
import { Empty, ErrorState, Loading } from "@/shared/ui/QueryState";
import { useNodeDrift, useNodeStacks } from "../api/getNodeStack";

const STACK_FIELDS = ["driver_version", "cuda_driver_version", "cuda_toolkits", "container_runtime",
  "nvidia_container_toolkit", "os", "kernel", "python_version"] as const;

interface Framework { name?: string; version?: string; cuda?: string }

export interface StackRow { field: string; expected: unknown; actual: unknown; drifted: boolean }

/** Rows for the comparison: every stack field, every framework pin, and any other drift the server reports. */
export function stackRows(stack: SoftwareStack | undefined, drift: NodeDrift | undefined): StackRow[] {
  const baseline = (drift?.baseline ?? null) as Record<string, unknown> | null;
  const driftByField = new Map((drift?.drift ?? []).map((item) => [item.field, item]));
  const rows: StackRow[] = [];
  const current = (stack ?? null) as Record<string, unknown> | null;
  for (const field of STACK_FIELDS) {
    const item = driftByField.get(field);
    const expected = baseline?.[field];
    rows.push({
      field,
      expected: item ? item.expected : (Array.isArray(expected) && !expected.length ? "" : expected),
      actual: current?.[field] ?? item?.actual,
      drifted: Boolean(item),
    });
  }
  const frameworks = new Map<string, { actual?: Framework; pinned?: Framework }>();
  for (const fw of ((stack?.frameworks ?? []) as Framework[])) {
    if (fw?.name) frameworks.set(fw.name.toLowerCase(), { ...frameworks.get(fw.name.toLowerCase()), actual: fw });
  }
  for (const fw of ((baseline?.frameworks ?? []) as Framework[])) {
    if (fw?.name) frameworks.set(fw.name.toLowerCase(), { ...frameworks.get(fw.name.toLowerCase()), pinned: fw });
  }
  for (const [name, { actual, pinned }] of frameworks) {
    for (const key of ["version", "cuda"] as const) {
      const field = `frameworks.${name}.${key}`;
      const item = driftByField.get(field);
      if (!actual?.[key] && !pinned?.[key] && !item) continue;
      rows.push({ field, expected: item ? item.expected : pinned?.[key], actual: actual?.[key] ?? item?.actual, drifted: Boolean(item) });
    }
  }
  const shown = new Set(rows.map((row) => row.field));
  for (const item of drift?.drift ?? []) {
    if (!shown.has(item.field)) rows.push({ field: item.field, expected: item.expected, actual: item.actual, drifted: true });
  }
  return rows;
}

export function StackPanel({ nodeId }: { nodeId: number }) {
  const { t } = useTranslation();
  const drift = useNodeDrift(nodeId);
  const stacks = useNodeStacks(nodeId);
  const stack = stacks.data?.[0];

  let body;
  if (drift.isPending || stacks.isPending) body = <Loading />;
  else if (drift.isError && stacks.isError) body = <ErrorState error={drift.error} onRetry={() => { void drift.refetch(); void stacks.refetch(); }} />;
  else if (!stack && !drift.data?.baseline) body = <Empty>{t("stack.nothing")}</Empty>;
  else {
    const rows = stackRows(stack, drift.data);
    const label = (field: string) => t(`stack.field.${field}`, { defaultValue: field });
    body = (
      <>
        <div className="status-line">
          {drift.data?.baseline ? (
            drift.data.drifted
              ? <Badge tone="bad">{t("stack.drifted", { count: drift.data.drift.length })}</Badge>
              : <Badge tone="good">{t("stack.matches")}</Badge>
          ) : <Badge tone="muted">{t("stack.noBaseline")}</Badge>}
          {drift.data?.baseline ? <span className="muted">{t("stack.baselineName", { name: drift.data.baseline.name })}</span> : null}
          <span className="muted">{stack ? t("stack.collected", { when: formatDateTime(stack.collected_at) }) : t("stack.noStack")}</span>
        </div>
        <div className="table-wrap">
          <table className="table table--compact" data-testid="stack-table">
            <caption className="visually-hidden">{t("stack.caption")}</caption>
            <thead>
              <tr>
                <th scope="col">{t("stack.component")}</th>
                <th scope="col">{t("stack.baseline")}</th>
                <th scope="col">{t("stack.actual")}</th>
                <th scope="col"><span className="visually-hidden">{t("stack.driftColumn")}</span></th>
              </tr>
            </thead>
            <tbody>
              {rows.map((row) => (
                <tr key={row.field} className={row.drifted ? "row--drift" : undefined} data-drifted={row.drifted ? "true" : undefined}>
                  <th scope="row">{label(row.field)}</th>
                  <td>{formatValue(row.expected)}</td>
                  <td>{formatValue(row.actual)}</td>
                  <td>{row.drifted ? <Badge tone="bad">{t("stack.drift")}</Badge> : null}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </>
    );
  }
  return <Panel title={t("stack.title")} testId="stack-panel">{body}</Panel>;
}
