// The node page's remediation panel: the node's incidents, and for operators the cordon / drain / reboot /
// replace buttons (each opens an incident with that operator workflow) and acknowledge / snooze for its findings.
import { useState } from "react";
import { useTranslation } from "react-i18next";
import { Link } from "react-router";
import { ApiError } from "@/shared/api/client";
import { Can } from "@/shared/auth/Authorization";
import { formatRelative } from "@/shared/lib/format";
import { FieldError } from "@/shared/ui/FieldError";
import { Panel } from "@/shared/ui/Panel";
import { ErrorState, QueryState } from "@/shared/ui/QueryState";
import { useCreateOverride, useNodeIncidents, useOpenIncident } from "../api/incidents";
import { NODE_ACTIONS } from "../types/incidents";
import { IncidentStateBadge, StepLabel } from "./IncidentParts";

export interface NodeFinding {
  id: number;
  title: string;
}

const SNOOZE_HOURS = 4;

function OperatorControls({ nodeId, findings }: { nodeId: number; findings: NodeFinding[] }) {
  const { t } = useTranslation();
  const open = useOpenIncident();
  const override = useCreateOverride();
  const [note, setNote] = useState("");
  const [done, setDone] = useState("");
  const error = open.error ?? override.error;
  const fields = error instanceof ApiError ? error.fields : {};
  const needNote = !note.trim();
  return (
    <div className="node-remediation-controls" data-testid="node-remediation-controls">
      <label className="field">
        <span>{t("incident.reason")}</span>
        <input value={note} onChange={(e) => setNote(e.target.value)} placeholder={t("incident.reasonPlaceholder")} />
        <FieldError errors={fields.reason ?? fields.note} />
      </label>
      <div className="button-row">
        {NODE_ACTIONS.map(({ action, workflow }) => (
          <button key={action} type="button" className="btn btn--small" disabled={open.isPending}
            onClick={() => open.mutate({ node: nodeId, workflow, note }, { onSuccess: (incident) => setDone(incident.key) })}>
            {t(`nodeAction.${action}`)}
          </button>
        ))}
      </div>
      {findings.length ? (
        <ul className="urgent">
          {findings.map((finding) => (
            <li key={finding.id}>
              {finding.title}{" "}
              <button type="button" className="btn btn--small" disabled={needNote || override.isPending}
                onClick={() => override.mutate({ kind: "acknowledge", finding: finding.id, reason: note })}>
                {t("nodeAction.acknowledge")}
              </button>{" "}
              <button type="button" className="btn btn--small" disabled={needNote || override.isPending}
                onClick={() => override.mutate({ kind: "snooze", finding: finding.id, reason: note,
                  until: new Date(Date.now() + SNOOZE_HOURS * 3600_000).toISOString() })}>
                {t("nodeAction.snooze", { hours: SNOOZE_HOURS })}
              </button>
            </li>
          ))}
        </ul>
      ) : null}
      {needNote && findings.length ? <p className="muted small">{t("incident.reasonNeeded")}</p> : null}
      {done ? <p role="status">{t("incident.opened", { key: done })}</p> : null}
      {override.isSuccess ? <p role="status">{t("incident.overrideSaved")}</p> : null}
      {error && !Object.keys(fields).length ? <ErrorState error={error} /> : null}
    </div>
  );
}

export function NodeRemediationPanel({ nodeId, findings }: { nodeId: number; findings: NodeFinding[] }) {
  const { t } = useTranslation();
  const incidents = useNodeIncidents(nodeId);
  return (
    <Panel title={t("incident.nodePanel")} testId="node-remediation" className="panel--wide">
      <QueryState query={incidents} what={t("nav.incidents")} isEmpty={(d) => d.length === 0} empty={t("incident.noneForNode")}>
        {(rows) => (
          <ul className="urgent">
            {rows.map((incident) => (
              <li key={incident.id}>
                <Link to={`/incidents/${incident.id}`}>{incident.key}</Link>{" "}
                <IncidentStateBadge incident={incident} /> {incident.workflow} · <StepLabel incident={incident} />
                <span className="muted small"> · {formatRelative(incident.opened_at)}</span>
              </li>
            ))}
          </ul>
        )}
      </QueryState>
      <Can role="operator"><OperatorControls nodeId={nodeId} findings={findings} /></Can>
    </Panel>
  );
}
