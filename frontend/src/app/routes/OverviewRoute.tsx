import { useTranslation } from "react-i18next";
import { CostSummary } from "@/features/billing/components/CostSummary";
import { UrgentFindings } from "@/features/findings/components/UrgentFindings";
import { BreakersPanel } from "@/features/incidents/components/BreakersPanel";
import { FleetSummaryPanels } from "@/features/fleet/components/FleetSummaryPanels";

export function OverviewRoute() {
  const { t } = useTranslation();
  return (
    <div className="page">
      <h1>{t("overview.title")}</h1>
      <FleetSummaryPanels />
      <div className="grid grid--two">
        <UrgentFindings />
        <CostSummary />
      </div>
      <BreakersPanel />
    </div>
  );
}
