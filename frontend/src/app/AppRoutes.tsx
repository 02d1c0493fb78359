import { Route, Routes } from "react-router";
import { AuditPage } from "@/features/accounts/components/AuditPage";
import { UsersPage } from "@/features/accounts/components/UsersPage";
import { LoginPage } from "@/features/auth/components/LoginPage";
import { ResetPasswordPage } from "@/features/auth/components/ResetPasswordPage";
import { BillingPage } from "@/features/billing/components/BillingPage";
import { EnrollPage } from "@/features/enrollment/components/EnrollPage";
import { FindingsPage } from "@/features/findings/components/FindingsPage";
import { IncidentsPage } from "@/features/incidents/components/IncidentsPage";
import { DeliveryLogPage } from "@/features/integrations/components/DeliveryLogPage";
import { IntegrationsPage } from "@/features/integrations/components/IntegrationsPage";
import { BaselinesPage } from "@/features/inventory/components/BaselinesPage";
import { ProvidersPage } from "@/features/inventory/components/ProvidersPage";
import { NodesPage } from "@/features/nodes/components/NodesPage";
import { RulesPage } from "@/features/rules/components/RulesPage";
import { SSHHostsPage } from "@/features/ssh/components/SSHHostsPage";
import { TokensPage } from "@/features/tokens/components/TokensPage";
import { FleetTrendsPage } from "@/features/trends/components/FleetTrendsPage";
import { Layout } from "./Layout";
import { RequireAuth } from "./RequireAuth";
import { IncidentDetailRoute } from "./routes/IncidentDetailRoute";
import { NodeDetailRoute } from "./routes/NodeDetailRoute";
import { NotFoundRoute } from "./routes/NotFoundRoute";
import { OverridesRoute } from "./routes/OverridesRoute";
import { OverviewRoute } from "./routes/OverviewRoute";

/** Every path here must also reach Django's console view (fleet/console/urls.py serves index.html). */
export function AppRoutes() {
  return (
    <Routes>
      <Route path="/login" element={<LoginPage />} />
      <Route path="/reset-password" element={<ResetPasswordPage />} />
      <Route element={<RequireAuth><Layout /></RequireAuth>}>
        <Route index element={<OverviewRoute />} />
        <Route path="nodes" element={<NodesPage />} />
        <Route path="nodes/:nodeId" element={<NodeDetailRoute />} />
        <Route path="findings" element={<FindingsPage />} />
        <Route path="incidents" element={<IncidentsPage />} />
        <Route path="incidents/:incidentId" element={<IncidentDetailRoute />} />
        <Route path="rules" element={<RulesPage />} />
        <Route path="enroll" element={<EnrollPage />} />
        <Route path="ssh" element={<SSHHostsPage />} />
        <Route path="tokens" element={<TokensPage />} />
        <Route path="integrations" element={<IntegrationsPage />} />
        <Route path="integrations/deliveries" element={<DeliveryLogPage />} />
        <Route path="trends" element={<FleetTrendsPage />} />
        <Route path="billing" element={<BillingPage />} />
        <Route path="providers" element={<ProvidersPage />} />
        <Route path="baselines" element={<BaselinesPage />} />
        <Route path="overrides" element={<OverridesRoute />} />
        <Route path="audit" element={<AuditPage />} />
        <Route path="users" element={<UsersPage />} />
        <Route path="*" element={<NotFoundRoute />} />
      </Route>
    </Routes>
  );
}
