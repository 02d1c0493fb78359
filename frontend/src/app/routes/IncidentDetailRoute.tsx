// Incident detail: the incidents feature's page with the integrations feature's external tickets of the incident.
import { useParams } from "react-router";
import { IncidentDetailPage } from "@/features/incidents/components/IncidentDetailPage";
import { TicketsPanel } from "@/features/integrations/components/TicketsPanel";

export function IncidentDetailRoute() {
  const id = Number(useParams().incidentId);
  return (
    <IncidentDetailPage>
      {Number.isInteger(id) && id > 0 ? <TicketsPanel of={{ incident_id: id }} /> : null}
    </IncidentDetailPage>
  );
}
