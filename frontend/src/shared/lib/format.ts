// Formatting helpers shared by every page. Numbers and dates follow the active UI language.
import i18n from "@/shared/i18n/i18n";

const dash = "—";

function locale(): string {
  return i18n.language || "en";
}

export function formatNumber(value: number | null | undefined, digits = 0): string {
  if (value === null || value === undefined || Number.isNaN(value)) return dash;
  return new Intl.NumberFormat(locale(), { maximumFractionDigits: digits, minimumFractionDigits: 0 }).format(value);
}

export function formatPercent(value: number | null | undefined, digits = 0): string {
  if (value === null || value === undefined || Number.isNaN(value)) return dash;
  return `${formatNumber(value, digits)} %`;
}

export function formatBytes(value: number | null | undefined): string {
  if (value === null || value === undefined || Number.isNaN(value)) return dash;
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let amount = value;
  let unit = 0;
  while (amount >= 1024 && unit < units.length - 1) {
    amount /= 1024;
    unit += 1;
  }
  return `${formatNumber(amount, amount < 10 && unit > 0 ? 1 : 0)} ${units[unit]}`;
}

export function formatDateTime(value: string | number | Date | null | undefined): string {
  if (value === null || value === undefined || value === "") return dash;
  const date = value instanceof Date ? value : new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  // One convention everywhere: the browser's local time with its zone named (charts name it under the axis).
  return new Intl.DateTimeFormat(locale(), {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
    timeZoneName: "short",
  }).format(date);
}

/** The zone every time of the console is shown in: "Europe/Berlin (GMT+1)", "UTC". */
export function timeZoneLabel(): string {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  const short = new Intl.DateTimeFormat("en", { timeZoneName: "short" }).formatToParts(new Date())
    .find((part) => part.type === "timeZoneName")?.value;
  return short && short !== zone ? `${zone} (${short})` : zone;
}

/** "3 min ago" in the active language. */
export function formatRelative(value: string | number | Date | null | undefined, now: number = Date.now()): string {
  if (value === null || value === undefined || value === "") return dash;
  const date = value instanceof Date ? value : new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  const seconds = Math.round((date.getTime() - now) / 1000);
  const abs = Math.abs(seconds);
  const rtf = new Intl.RelativeTimeFormat(locale(), { numeric: "auto" });
  if (abs < 60) return rtf.format(seconds, "second");
  if (abs < 3600) return rtf.format(Math.round(seconds / 60), "minute");
  if (abs < 86400) return rtf.format(Math.round(seconds / 3600), "hour");
  return rtf.format(Math.round(seconds / 86400), "day");
}

export function formatMoney(value: number | string | null | undefined, currency = "USD"): string {
  if (value === null || value === undefined || value === "") return dash;
  const amount = typeof value === "string" ? Number(value) : value;
  if (Number.isNaN(amount)) return String(value);
  try {
    return new Intl.NumberFormat(locale(), { style: "currency", currency, maximumFractionDigits: 2 }).format(amount);
  } catch {
    return `${formatNumber(amount, 2)} ${currency}`;
  }
}

/** Any JSON value as short text, for evidence and change-log cells. */
export function formatValue(value: unknown): string {
  if (value === null || value === undefined || value === "") return dash;
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return JSON.stringify(value);
}

/** A length of time in its largest sensible unit, in the active language: "45 s", "4 min", "3 h", "2 d". */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return dash;
  const abs = Math.max(0, seconds);
  const [amount, unit] = abs < 60 ? [abs, "second"] : abs < 3600 ? [Math.ceil(abs / 60), "minute"]
    : abs < 86400 ? [Math.floor(abs / 3600), "hour"] : [Math.floor(abs / 86400), "day"];
  return new Intl.NumberFormat(locale(), { style: "unit", unit, unitDisplay: "short", maximumFractionDigits: 0 }).format(amount);
}

/** Seconds since `value` (an ISO time), or null. */
export function secondsSince(value: string | null | undefined, now: number = Date.now()): number | null {
  if (!value) return null;
  const time = new Date(value).getTime();
  return Number.isNaN(time) ? null : Math.max(0, Math.round((now - time) / 1000));
}
