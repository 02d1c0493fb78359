// The fixed triage order (visibility → software chain → capacity & data path → platform / hardware), each
// step passed / failed / unknown with the findings and evidence behind it; the first failing step is the headline.
import { useTranslation } from "react-i18next";
import { TRIAGE_STEPS } from "@/shared/lib/domain";
import { formatDuration, formatRelative } from "@/shared/lib/format";
import { Badge, severityTone, type Tone } from "@/shared/ui/Badge";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import { evidenceUrl, useNodeTriage } from "../api/getNodeTriage";
import { findingTitle, type Triage, type TriageStepResult } from "../types/findings";
import { Evidence } from "./Evidence";

/** Steps in the fixed order whatever order the server used; a step it left out is "unknown". */
export function orderedSteps(triage: Pick<Triage, "steps">): Array<Partial<TriageStepResult> & Pick<TriageStepResult, "step" | "status">> {
  const byStep = new Map(triage.steps.map((result) => [result.step as string, result]));
  return TRIAGE_STEPS.map((step, index) => byStep.get(step) ?? { step, status: "unknown" as const, number: index + 1 });
}

function statusTone(status: string): Tone {
  if (status === "passed" || status === "pass" || status === "ok") return "good";
  if (status === "failed" || status === "fail") return "bad";
  // A condition inside its hold time: amber "forming", never a green pass.
  if (status === "warning" || status === "degraded" || status === "pending") return "warn";
  return "muted";
}

function statusIcon(status: string): string {
  const tone = statusTone(status);
  return tone === "good" ? "✓" : tone === "bad" ? "✗" : tone === "warn" ? "!" : "?";
}

export function TriageChecklistView({ triage }: { triage: Pick<Triage, "steps"> & Partial<Triage> }) {
  const { t } = useTranslation();
  const steps = orderedSteps(triage);
  const firstFailing = steps.find((s) => statusTone(s.status) === "bad");
  // Findings another open finding explains (the server's `consequences`): shown on their step, marked with the cause.
  const summaries = new Map(steps.flatMap((s) => s.findings ?? []).map((f) => [f.id, f.summary]));
  const causeOf = new Map((triage.consequences ?? []).map((c) => [c.finding, summaries.get(c.root_cause) ?? c.explained_by_rule]));
  const anyUnknown = steps.some((s) => s.status === "unknown");
  const firstForming = firstFailing || anyUnknown ? undefined : steps.find((s) => s.status === "pending");
  const forming = firstForming?.pending?.[0];
  let headline = triage.headline || (firstFailing
    ? t("triage.failedAt", { step: t(`step.${firstFailing.step}`, { defaultValue: firstFailing.step }) })
    : t("triage.allPassed"));
  if (firstForming) {
    headline = t("triageList.formingHeadline", { n: firstForming.number ?? TRIAGE_STEPS.indexOf(firstForming.step) + 1,
      time: formatDuration(forming?.opens_in_s ?? 0), summary: forming?.summary || forming?.rule || "" });
  }
  const headlineTone = firstFailing ? "bad" : firstForming ? "warn" : anyUnknown ? "muted" : "good";
  return (
    <>
      <p className={`headline headline--${headlineTone}`} data-testid="triage-headline" data-tone={headlineTone} role="status">
        {headline}
      </p>
      {triage.fresh === false && triage.last_report_at ? (
        <p className="muted small">{t("triage.stale", { when: formatRelative(triage.last_report_at) })}</p>
      ) : null}
      <ol className="checklist" data-testid="triage-checklist">
        {steps.map((result, index) => (
          <li key={result.step} className={`checklist__step checklist__step--${statusTone(result.status)}`} data-step={result.step}
            data-status={result.status}>
            <div className="checklist__head">
              <span className="checklist__icon" aria-hidden="true">{statusIcon(result.status)}</span>
              <span className="checklist__name">
                {t("triage.stepN", { n: result.number ?? index + 1 })} — {t(`step.${result.step}`, { defaultValue: result.title ?? result.step })}
              </span>
              <Badge tone={statusTone(result.status)}>{t(`stepStatus.${result.status}`, { defaultValue: result.status })}</Badge>
            </div>
            <p className="muted small">{result.status === "pending" && result.pending?.length
              ? t("triageList.forming", { time: formatDuration(result.pending[0].opens_in_s) })
              : result.reason || t(`stepHint.${result.step}`, { defaultValue: "" })}</p>
            {result.findings?.length ? (
              <ul className="checklist__findings">
                {result.findings.map((finding) => (
                  <li key={finding.id} className={causeOf.has(finding.id) ? "muted" : undefined} data-consequence={causeOf.has(finding.id) || undefined}>
                    <Badge tone={severityTone(finding.severity)}>{t(`severity.${finding.severity}`, { defaultValue: finding.severity })}</Badge>{" "}
                    <strong>{findingTitle(finding)}</strong>
                    {finding.gpu_index != null ? <span className="muted small"> · GPU {finding.gpu_index}</span> : null}
                    <span className="muted small"> · {t("triage.since", { when: formatRelative(finding.opened_at ?? finding.first_seen) })}</span>
                    {causeOf.has(finding.id) ? (
                      <div className="small">{t("triage.consequenceOf", { cause: causeOf.get(finding.id) })}</div>
                    ) : finding.recommended_action ? <div className="small">{t("triage.next")}: {finding.recommended_action}</div> : null}
                    {finding.evidence ? (
                      <details>
                        <summary>{t("triage.evidence")}</summary>
                        <Evidence value={finding.evidence} />
                      </details>
                    ) : null}
                  </li>
                ))}
              </ul>
            ) : null}
            {result.pending?.length ? (
              <ul className="checklist__pending">
                {result.pending.map((pending) => (
                  <li key={`${pending.rule}-${pending.subject}`} className="small text-warn" data-testid="forming">
                    {t("triageList.formingItem", { summary: pending.summary || pending.rule, time: formatDuration(pending.opens_in_s) })}
                  </li>
                ))}
              </ul>
            ) : null}
          </li>
        ))}
      </ol>
    </>
  );
}

export function EvidenceDownload({ nodeId }: { nodeId: number }) {
  const { t } = useTranslation();
  return (
    <span className="evidence-download">
      <a className="btn btn--small" href={evidenceUrl(nodeId, "text")} download={`node-${nodeId}-evidence.txt`}>
        {t("triage.downloadText")}
      </a>
      <a className="btn btn--small" href={evidenceUrl(nodeId, "json")} download={`node-${nodeId}-evidence.json`}>
        {t("triage.downloadJson")}
      </a>
    </span>
  );
}

export function TriageChecklist({ nodeId }: { nodeId: number }) {
  const { t } = useTranslation();
  const triage = useNodeTriage(nodeId);
  return (
    <Panel title={t("triage.title")} testId="triage-panel" actions={<EvidenceDownload nodeId={nodeId} />}>
      <QueryState query={triage} what={t("triage.title")}>
        {(data) => <TriageChecklistView triage={data} />}
      </QueryState>
    </Panel>
  );
}
