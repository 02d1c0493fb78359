// One incident: what it is about, the boundary row and policy that chose its workflow, the plan with each step's
// state (operators act on the current step), its findings and the append-only timeline.
import { useState, type ReactNode } from "react";
import { useTranslation } from "react-i18next";
import { Link, useParams } from "react-router";
import { ApiError } from "@/shared/api/client";
import { Can } from "@/shared/auth/Authorization";
import { useCurrentUser } from "@/shared/auth/session";
import { formatDateTime, formatRelative } from "@/shared/lib/format";
import { Badge, severityTone } from "@/shared/ui/Badge";
import { FieldError } from "@/shared/ui/FieldError";
import { KeyValueList } from "@/shared/ui/KeyValueList";
import { Panel } from "@/shared/ui/Panel";
import { ErrorState, Loading, QueryState } from "@/shared/ui/QueryState";
import { useCancelIncident, useEscalate, useIncident, useIncidentTimeline, useStepAction, useWorkflows } from "../api/incidents";
import { OPEN_STATES, stepActions, type IncidentDetail, type PlanStep } from "../types/incidents";
import { IncidentStateBadge, stepStatusTone } from "./IncidentParts";

function StepControls({ incident, step }: { incident: IncidentDetail; step: PlanStep }) {
  const { t } = useTranslation();
  const act = useStepAction();
  const [note, setNote] = useState("");
  const me = useCurrentUser();
  const rule = incident.approval_rule?.step_index === step.index ? incident.approval_rule : null;
  const mine = rule?.excluded.find((entry) => entry.username === me?.username);
  const actions = stepActions(step, step.waiting_on).filter((action) => !(action === "approve" && mine));
  if (actions.length === 0 && !rule) return null;
  return (
    <div className="step-controls" data-testid="step-controls">
      {rule ? (
        <p className="small" data-testid="two-person-rule">
          {t("incident.twoPerson", { names: rule.excluded.map((entry) => `${entry.username} (${entry.reason})`).join(", ") })}
          {mine ? <> {t("incident.twoPersonYou", { reason: mine.reason })}</> : null}
        </p>
      ) : null}
      <label className="field">
        <span>{t("incident.note")}</span>
        <input value={note} onChange={(e) => setNote(e.target.value)} placeholder={t("incident.notePlaceholder")} />
      </label>
      <div className="button-row">
        {actions.map((action) => (
          <button key={action} type="button" className={`btn btn--small${action === "complete" || action === "approve" ? " btn--primary" : ""}`}
            disabled={act.isPending}
            onClick={() => act.mutate({ id: incident.id, action, stepIndex: step.index, note }, { onSuccess: () => setNote("") })}>
            {t(`stepAction.${action}`)}
          </button>
        ))}
      </div>
      {act.error ? <ErrorState error={act.error} /> : null}
    </div>
  );
}

function PlanPanel({ incident }: { incident: IncidentDetail }) {
  const { t } = useTranslation();
  return (
    <Panel title={t("incident.plan")} testId="incident-plan" className="panel--wide">
      <div className="table-wrap">
        <table className="table table--compact">
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">{t("incident.step")}</th>
              <th scope="col">{t("incidents.state")}</th>
              <th scope="col">{t("incident.executor")}</th>
              <th scope="col">{t("incident.message")}</th>
            </tr>
          </thead>
          <tbody>
            {incident.plan.map((step) => (
              <tr key={step.index} className={step.current ? "is-current" : undefined} aria-current={step.current ? "step" : undefined}>
                <td>{step.index + 1}</td>
                <td>
                  <strong>{t(`stepKind.${step.kind}`, { defaultValue: step.kind })}</strong>
                  {step.title ? <div className="muted small">{step.title}</div> : null}
                  {step.requires_approval ? <Badge tone="warn">{t("incident.needsApproval")}</Badge> : null}
                </td>
                <td>
                  {step.status ? <Badge tone={stepStatusTone(step.status)}>{t(`runStatus.${step.status}`, { defaultValue: step.status })}</Badge> : <span className="muted">—</span>}
                  {step.attempt > 1 ? <span className="muted small"> {t("incident.attempt", { attempt: step.attempt })}</span> : null}
                </td>
                <td>{step.executor || "—"}</td>
                <td>
                  <div className="small pre-line">{step.message}</div>
                  {step.current ? <Can role="operator"><StepControls incident={incident} step={step} /></Can> : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </Panel>
  );
}

function IncidentControls({ incident }: { incident: IncidentDetail }) {
  const { t } = useTranslation();
  const workflows = useWorkflows();
  const escalate = useEscalate();
  const cancel = useCancelIncident();
  const [workflow, setWorkflow] = useState("");
  const [note, setNote] = useState("");
  const error = escalate.error ?? cancel.error;
  const fields = error instanceof ApiError ? error.fields : {};
  return (
    <Panel title={t("incident.actions")} testId="incident-actions">
      <div className="filters">
        <label className="field">
          <span>{t("incident.escalateTo")}</span>
          <select value={workflow} onChange={(e) => setWorkflow(e.target.value)}>
            <option value="">—</option>
            {(workflows.data ?? []).filter((w) => w.slug !== incident.workflow).map((w) => <option key={w.slug} value={w.slug}>{w.name}</option>)}
          </select>
          <FieldError errors={fields.workflow} />
        </label>
        <label className="field field--grow">
          <span>{t("incident.note")}</span>
          <input value={note} onChange={(e) => setNote(e.target.value)} />
          <FieldError errors={fields.note} />
        </label>
      </div>
      <div className="button-row">
        <button type="button" className="btn btn--small" disabled={!workflow || escalate.isPending}
          onClick={() => escalate.mutate({ id: incident.id, workflow, note })}>{t("incident.escalate")}</button>
        <button type="button" className="btn btn--small" disabled={!note || cancel.isPending}
          onClick={() => cancel.mutate({ id: incident.id, note })}>{t("incident.cancel")}</button>
      </div>
      {error && !Object.keys(fields).length ? <ErrorState error={error} /> : null}
    </Panel>
  );
}

function Timeline({ id }: { id: number }) {
  const { t } = useTranslation();
  const timeline = useIncidentTimeline(id);
  return (
    <Panel title={t("incident.timeline")} testId="incident-timeline" className="panel--wide">
      <QueryState query={timeline} what={t("incident.timeline")} isEmpty={(d) => d.length === 0}>
        {(entries) => (
          <ol className="incident-timeline">
            {entries.map((entry) => (
              <li key={entry.id}>
                <span className="muted small" title={entry.at}>{formatDateTime(entry.at)}</span>{" "}
                <Badge tone="neutral">{t(`timelineKind.${entry.kind}`, { defaultValue: entry.kind })}</Badge>{" "}
                <span className="small">{entry.actor_label}</span>
                <div className="pre-line">{entry.message}</div>
              </li>
            ))}
          </ol>
        )}
      </QueryState>
    </Panel>
  );
}

/** `children` are panels the app adds from other features (the incident's external tickets). */
export function IncidentDetailPage({ children }: { children?: ReactNode }) {
  const { t } = useTranslation();
  const { incidentId } = useParams();
  const id = Number(incidentId);
  const query = useIncident(id);
  if (!Number.isInteger(id) || id <= 0) return <div className="page"><ErrorState error={new Error(t("incident.badId"))} /></div>;
  if (query.isPending) return <div className="page"><Loading /></div>;
  if (query.isError && !query.data) return <div className="page"><ErrorState error={query.error} onRetry={() => void query.refetch()} /></div>;
  const incident = query.data!;
  const open = OPEN_STATES.includes(incident.state);
  const policy = incident.policy;
  return (
    <div className="page">
      <p className="breadcrumb"><Link to="/incidents">← {t("nav.incidents")}</Link></p>
      <h1>
        {incident.key} <IncidentStateBadge incident={incident} />{" "}
        {incident.dry_run ? <Badge tone="info">{t("incident.dryRun")}</Badge> : null}
      </h1>
      <p>{incident.title}</p>
      {incident.state_reason ? <p className="muted" data-testid="state-reason">{incident.state_reason}</p> : null}
      <div className="grid grid--two">
        <Panel title={t("incident.summary")}>
          <KeyValueList items={[
            [t("incidents.node"), incident.node ? <Link to={`/nodes/${incident.node}`}>{incident.hostname}</Link> : incident.pool_name ?? "—"],
            [t("nodes.col.pool"), incident.pool_name ?? "—"],
            [t("incident.provider"), incident.provider_name ?? "—"],
            [t("incidents.cause"), `${t(`cause.${incident.cause_kind}`, { defaultValue: incident.cause_kind })} (${incident.cause})`],
            [t("incidents.workflow"), `${incident.workflow_name} (${incident.workflow})`],
            [t("incidents.opened"), `${formatDateTime(incident.opened_at)} · ${incident.opened_by}`],
            [t("incident.started"), incident.started_at ? formatRelative(incident.started_at) : "—"],
            [t("incident.closed"), incident.closed_at ? `${formatDateTime(incident.closed_at)} · ${incident.resolution}` : "—"],
            [t("incident.queuePosition"), incident.queue_position ?? "—"],
            [t("incident.replacement"), incident.replacement_node ? <Link to={`/nodes/${incident.replacement_node}`}>{incident.replacement_hostname}</Link> : "—"],
            [t("incident.evidence"), incident.evidence.length
              ? <a href={`/api/v1/incidents/${incident.id}/evidence/?format=text`}>{t("incident.evidenceText")}</a> : "—"],
          ]} />
        </Panel>
        <Panel title={t("incident.boundaryRow")} testId="incident-boundary">
          <KeyValueList items={[
            [t("incident.deliveryForm"), incident.boundary.delivery_form ? t(`deliveryForm.${incident.boundary.delivery_form}`) : "—"],
            [t("findings.layer"), incident.boundary.layer ? t(`layer.${incident.boundary.layer}`, { defaultValue: incident.boundary.layer }) : "—"],
            [t("incidents.responsible"), incident.boundary.responsible_party ? t(`owner.${incident.boundary.responsible_party}`, { defaultValue: incident.boundary.responsible_party }) : "—"],
            [t("incident.boundarySource"), incident.boundary.responsibility_source ? t(`boundarySource.${incident.boundary.responsibility_source}`, { defaultValue: incident.boundary.responsibility_source }) : "—"],
            [t("incident.policy"), policy ? t("incident.policyRef", { priority: policy.priority, name: policy.name, version: policy.version }) : t("incident.noPolicy")],
          ]} />
        </Panel>
      </div>
      <PlanPanel incident={incident} />
      {open ? <Can role="operator"><IncidentControls incident={incident} /></Can> : null}
      <Panel title={t("incident.findings")} testId="incident-findings">
        {incident.findings.length === 0 ? <p className="muted">{t("incident.noFindings")}</p> : (
          <ul className="urgent">
            {incident.findings.map((finding) => (
              <li key={finding.id}>
                <Badge tone={severityTone(finding.severity)}>{t(`severity.${finding.severity}`, { defaultValue: finding.severity })}</Badge>{" "}
                {finding.summary} <span className="muted small">({finding.rule}, {t(`findingState.${finding.state}`, { defaultValue: finding.state })}{finding.trigger ? `, ${t("incident.trigger")}` : ""})</span>
              </li>
            ))}
          </ul>
        )}
      </Panel>
      {children}
      <Timeline id={incident.id} />
    </div>
  );
}
