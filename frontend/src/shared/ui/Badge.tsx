import type { ReactNode } from "react";

export type Tone = "neutral" | "good" | "warn" | "bad" | "info" | "muted";

export function Badge({ tone = "neutral", children, title }: { tone?: Tone; children: ReactNode; title?: string }) {
  return (
    <span className={`badge badge--${tone}`} title={title}>
      {children}
    </span>
  );
}

export function severityTone(severity: string | null | undefined): Tone {
  switch (severity) {
    case "critical":
    case "error":
      return "bad";
    case "warning":
      return "warn";
    case "info":
      return "info";
    default:
      return "neutral";
  }
}

export function nodeStateTone(state: string | null | undefined): Tone {
  switch (state) {
    case "active":
      return "good";
    case "cordoned":
    case "draining":
    case "replacing":
    case "enrolling":
      return "warn";
    case "preempted":
      return "bad";
    case "retired":
      return "muted";
    default:
      return "neutral";
  }
}
