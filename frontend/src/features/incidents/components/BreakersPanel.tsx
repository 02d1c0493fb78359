// The overview's remediation panel: per pool, nodes being remediated against the limit, the queue, dry run and
// the circuit breaker (operators reset an open one, with a note).
import { useState } from "react";
import { useTranslation } from "react-i18next";
import { Link } from "react-router";
import { Can } from "@/shared/auth/Authorization";
import { Badge } from "@/shared/ui/Badge";
import { Panel } from "@/shared/ui/Panel";
import { ErrorState, QueryState } from "@/shared/ui/QueryState";
import { usePoolRemediation, useResetBreaker } from "../api/incidents";
import type { PoolOverview } from "../types/incidents";

function ResetBreaker({ row }: { row: PoolOverview }) {
  const { t } = useTranslation();
  const reset = useResetBreaker();
  const [note, setNote] = useState("");
  if (row.breaker_id == null) return null;
  return (
    <span className="inline-form">
      <input aria-label={t("breakers.resetNote", { pool: row.name })} value={note} onChange={(e) => setNote(e.target.value)}
        placeholder={t("breakers.resetPlaceholder")} />
      <button type="button" className="btn btn--small" disabled={!note.trim() || reset.isPending}
        onClick={() => reset.mutate({ id: row.breaker_id!, note })}>{t("breakers.reset")}</button>
      {reset.error ? <ErrorState error={reset.error} /> : null}
    </span>
  );
}

export function BreakersPanel() {
  const { t } = useTranslation();
  const pools = usePoolRemediation();
  return (
    <Panel title={t("breakers.title")} testId="breakers" className="panel--wide"
      actions={<Link to="/incidents">{t("breakers.allIncidents")}</Link>}>
      <QueryState query={pools} what={t("breakers.title")} isEmpty={(d) => d.length === 0} empty={t("breakers.noPools")}>
        {(rows) => (
          <div className="table-wrap">
            <table className="table table--compact" data-testid="breakers-table">
              <thead>
                <tr>
                  <th scope="col">{t("nodes.col.pool")}</th>
                  <th scope="col">{t("breakers.slots")}</th>
                  <th scope="col">{t("breakers.queued")}</th>
                  <th scope="col">{t("breakers.breaker")}</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((row) => (
                  <tr key={row.pool}>
                    <td>{row.name} {row.dry_run ? <Badge tone="info">{t("incident.dryRun")}</Badge> : null}</td>
                    <td>{t("breakers.slotsValue", { active: row.active_nodes, max: row.max_concurrent_replacements })}</td>
                    <td>{row.queued ? <Link to={`/incidents?pool=${row.pool}`}>{row.queued}</Link> : 0}</td>
                    <td>
                      <Badge tone={row.breaker_state === "open" ? "bad" : "good"}>{t(`breakerState.${row.breaker_state}`, { defaultValue: row.breaker_state })}</Badge>
                      {row.breaker_incident ? <> <Link to={`/incidents?cause=mass_failure&pool=${row.pool}`}>{row.breaker_incident}</Link></> : null}
                      {row.breaker_state === "open" ? <Can role="operator"> <ResetBreaker row={row} /></Can> : null}
                    </td>
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
