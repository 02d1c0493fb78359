// The time-range picker of every chart: 1 h, 24 h, 7 d, 30 d (the server's ranges, fleet/core/timeranges.py).
import { useTranslation } from "react-i18next";

export const RANGES = ["1h", "24h", "7d", "30d"] as const;
export type RangeName = (typeof RANGES)[number];

/** Seconds per range and the step the charts use for it (the same steps as the server's fleet charts). */
export const RANGE_SECONDS: Record<RangeName, { span: number; step: number }> = {
  "1h": { span: 3600, step: 60 },
  "24h": { span: 86_400, step: 900 },
  "7d": { span: 7 * 86_400, step: 3600 },
  "30d": { span: 30 * 86_400, step: 6 * 3600 },
};

export function asRange(value: string | null | undefined, fallback: RangeName = "24h"): RangeName {
  return (RANGES as readonly string[]).includes(value ?? "") ? (value as RangeName) : fallback;
}

export function RangePicker({ value, onChange, testId }: { value: RangeName; onChange: (range: RangeName) => void; testId?: string }) {
  const { t } = useTranslation();
  return (
    <div className="segmented" role="group" aria-label={t("charts.range")} data-testid={testId}>
      {RANGES.map((range) => (
        <button key={range} type="button" className={`btn btn--small${range === value ? " is-active" : ""}`}
          aria-pressed={range === value} onClick={() => onChange(range)}>
          {t(`charts.ranges.${range}`)}
        </button>
      ))}
    </div>
  );
}
