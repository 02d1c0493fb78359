// Node detail: composes the nodes, findings and billing features. The boundary matrix gets the node's
// active findings here, so neither feature depends on the other.
import { useTranslation } from "react-i18next";
import { Link, useParams } from "react-router";
import { useNodeFindings } from "@/features/findings/api/getFindings";
import { TriageChecklist } from "@/features/findings/components/TriageChecklist";
import { findingTitle, isActive } from "@/features/findings/types/findings";
import { NodeBillingPanel } from "@/features/billing/components/NodeBillingPanel";
import { useNodeIncidents } from "@/features/incidents/api/incidents";
import { NodeRemediationPanel } from "@/features/incidents/components/NodeRemediationPanel";
import { OPEN_STATES } from "@/features/incidents/types/incidents";
import { TicketsPanel } from "@/features/integrations/components/TicketsPanel";
import { useNode } from "@/features/nodes/api/getNode";
import { useNodeBoundary } from "@/features/nodes/api/getNodeBoundary";
import { BoundaryMatrix, WhomToCall, type MatrixFinding } from "@/features/nodes/components/BoundaryMatrix";
import { GpuPanel } from "@/features/nodes/components/GpuPanel";
import { ChangeLogPanel, EventsPanel } from "@/features/nodes/components/HistoryPanels";
import { InventoryPanel } from "@/features/nodes/components/InventoryPanel";
import { LiveStatusPanel } from "@/features/nodes/components/LiveStatusPanel";
import { NodeChartsPanel } from "@/features/nodes/components/NodeChartsPanel";
import { NodeHeader } from "@/features/nodes/components/NodeHeader";
import { StackPanel } from "@/features/nodes/components/StackPanel";
import { ApiError } from "@/shared/api/client";
import type { Node } from "@/shared/api/types";
import { Badge } from "@/shared/ui/Badge";
import { Panel } from "@/shared/ui/Panel";
import { ErrorState, Loading, NotAvailable } from "@/shared/ui/QueryState";

function BoundaryPanel({ nodeId, providerName }: { nodeId: number; providerName?: string }) {
  const { t } = useTranslation();
  const boundary = useNodeBoundary(nodeId);
  const findings = useNodeFindings(nodeId);
  const active: MatrixFinding[] = (findings.data?.results ?? []).filter(isActive).map((finding) => ({
    id: finding.id,
    layer: finding.layer,
    title: findingTitle(finding),
    severity: finding.severity,
    responsibleParty: finding.responsible_party,
    action: finding.recommended_action,
  }));
  let body;
  if (boundary.isPending) body = <Loading />;
  else if (boundary.isError && !boundary.data) body = <ErrorState error={boundary.error} onRetry={() => void boundary.refetch()} />;
  else {
    const cells = boundary.data ?? [];
    body = (
      <>
        <WhomToCall cells={cells} findings={active} providerName={providerName} />
        {findings.isError && !findings.data ? (
          findings.error instanceof ApiError && findings.error.isNotAvailable
            ? <NotAvailable what={t("findings.title")} />
            : <ErrorState error={findings.error} />
        ) : null}
        <BoundaryMatrix cells={cells} findings={active} providerName={providerName} />
      </>
    );
  }
  return <Panel title={t("boundary.title")} testId="boundary-panel" className="panel--wide">{body}</Panel>;
}

/** The node's incidents and the operator's buttons; the active findings come from the findings feature. */
function RemediationPanel({ nodeId }: { nodeId: number }) {
  const findings = useNodeFindings(nodeId);
  const active = (findings.data?.results ?? []).filter(isActive).map((f) => ({ id: f.id, title: findingTitle(f) }));
  return <NodeRemediationPanel nodeId={nodeId} findings={active} />;
}

/** The header line with the node's open incident, from the incidents feature. */
function NodeHeaderWithIncident({ node }: { node: Node }) {
  const incidents = useNodeIncidents(node.id);
  const open = (incidents.data ?? []).find((incident) => OPEN_STATES.includes(incident.state));
  return <NodeHeader node={node} incident={open ? { id: open.id, key: open.key, state: open.state } : null} />;
}

export function NodeDetailRoute() {
  const { t } = useTranslation();
  const { nodeId } = useParams();
  const id = Number(nodeId);
  const node = useNode(id);

  if (!Number.isInteger(id) || id <= 0) return <div className="page"><ErrorState error={new Error(t("node.badId"))} /></div>;
  if (node.isPending) return <div className="page"><Loading /></div>;
  if (node.isError && !node.data) {
    return (
      <div className="page">
        <p><Link to="/nodes">← {t("nav.nodes")}</Link></p>
        {node.error instanceof ApiError && node.error.status === 404
          ? <div className="state state--empty" role="alert">{t("node.notFound")}</div>
          : <ErrorState error={node.error} onRetry={() => void node.refetch()} />}
      </div>
    );
  }
  const data = node.data!;
  return (
    <div className="page">
      <p className="breadcrumb"><Link to="/nodes">← {t("nav.nodes")}</Link></p>
      <h1 className="node-title">
        {data.hostname}{" "}
        <Badge tone="info">{t(`deliveryForm.${data.delivery_form}`)}</Badge>{" "}
        <Badge tone="neutral">{data.provider_name}</Badge>
      </h1>
      <NodeHeaderWithIncident node={data} />
      <BoundaryPanel nodeId={id} providerName={data.provider_name} />
      <TriageChecklist nodeId={id} />
      <RemediationPanel nodeId={id} />
      <div className="grid grid--two">
        <InventoryPanel node={data} />
        <LiveStatusPanel nodeId={id} />
      </div>
      <GpuPanel nodeId={id} />
      <NodeChartsPanel nodeId={id} />
      <StackPanel nodeId={id} />
      <div className="grid grid--two">
        <ChangeLogPanel nodeId={id} />
        <EventsPanel nodeId={id} />
      </div>
      <TicketsPanel of={{ node: id }} />
      <NodeBillingPanel nodeId={id} />
    </div>
  );
}
