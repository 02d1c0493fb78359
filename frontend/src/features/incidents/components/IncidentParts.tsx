// Small pieces the incident views share: the state badge and the step label.
import { useTranslation } from "react-i18next";
import { Badge, type Tone } from "@/shared/ui/Badge";
import type { Incident } from "../types/incidents";

export function incidentStateTone(state: string): Tone {
  switch (state) {
    case "resolved":
      return "good";
    case "cancelled":
      return "muted";
    case "needs_attention":
    case "paused":
      return "bad";
    case "awaiting_approval":
    case "queued":
      return "warn";
    default:
      return "info";
  }
}

export function stepStatusTone(status: string): Tone {
  switch (status) {
    case "done":
      return "good";
    case "failed":
      return "bad";
    case "waiting":
    case "awaiting_approval":
      return "warn";
    case "running":
    case "pending":
      return "info";
    default:
      return "muted";
  }
}

export function IncidentStateBadge({ incident }: { incident: Pick<Incident, "state" | "waiting_on"> }) {
  const { t } = useTranslation();
  const waiting = incident.state === "waiting" && incident.waiting_on
    ? ` · ${t(`waitingOn.${incident.waiting_on}`, { defaultValue: incident.waiting_on })}` : "";
  return <Badge tone={incidentStateTone(incident.state)}>{t(`incidentState.${incident.state}`, { defaultValue: incident.state })}{waiting}</Badge>;
}

export function StepLabel({ incident }: { incident: Pick<Incident, "current_step" | "step_count" | "current_step_kind"> }) {
  const { t } = useTranslation();
  if (!incident.current_step_kind) return <span className="muted">{t("incidents.allSteps", { count: incident.step_count })}</span>;
  return (
    <span>
      {t("incidents.stepOf", { step: incident.current_step + 1, count: incident.step_count })}{" "}
      {t(`stepKind.${incident.current_step_kind}`, { defaultValue: incident.current_step_kind })}
    </span>
  );
}
