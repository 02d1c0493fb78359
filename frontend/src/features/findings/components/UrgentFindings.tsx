import { useTranslation } from "react-i18next";
import { Link } from "react-router";
import { severityRank } from "@/shared/lib/domain";
import { formatRelative } from "@/shared/lib/format";
import { Badge, severityTone } from "@/shared/ui/Badge";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import { useFindings } from "../api/getFindings";
import { findingTitle, type Finding } from "../types/findings";

export function mostUrgent(findings: Finding[], limit = 8): Finding[] {
  return [...findings]
    .sort((a, b) => severityRank(a.severity) - severityRank(b.severity) ||
      String(b.last_seen ?? "").localeCompare(String(a.last_seen ?? "")))
    .slice(0, limit);
}

export function UrgentFindings() {
  const { t } = useTranslation();
  const findings = useFindings({ state: ["open"], page_size: 100 });
  return (
    <Panel title={t("overview.urgent")} testId="urgent-findings"
      actions={<Link to="/findings">{t("overview.allFindings")}</Link>}>
      <QueryState query={findings} what={t("findings.title")} isEmpty={(d) => d.results.length === 0} empty={t("overview.noFindings")}>
        {(data) => (
          <ul className="urgent">
            {mostUrgent(data.results).map((finding) => (
              <li key={finding.id}>
                <Badge tone={severityTone(finding.severity)}>{t(`severity.${finding.severity}`, { defaultValue: finding.severity })}</Badge>{" "}
                <Link to={`/nodes/${finding.node}`}>{finding.hostname || `#${finding.node}`}</Link>
                {" — "}{findingTitle(finding)}
                <span className="muted small">
                  {" · "}{t(`layer.${finding.layer}`, { defaultValue: finding.layer })}
                  {finding.responsible_party ? ` → ${t(`owner.${finding.responsible_party}`, { defaultValue: finding.responsible_party })}` : ""}
                  {" · "}{formatRelative(finding.last_seen ?? finding.first_seen)}
                </span>
              </li>
            ))}
          </ul>
        )}
      </QueryState>
    </Panel>
  );
}
