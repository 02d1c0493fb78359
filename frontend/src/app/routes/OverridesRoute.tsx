// Overrides in one place: the responsibility boundary's (inventory) and the rules' per pool (health).
import { useTranslation } from "react-i18next";
import { BoundaryOverridesPanel } from "@/features/inventory/components/BoundaryOverridesPanel";
import { RuleOverridesPanel } from "@/features/rules/components/RuleOverridesPanel";

export function OverridesRoute() {
  const { t } = useTranslation();
  return (
    <div className="page" data-testid="overrides-page">
      <h1>{t("overrides.title")}</h1>
      <BoundaryOverridesPanel />
      <RuleOverridesPanel />
    </div>
  );
}
