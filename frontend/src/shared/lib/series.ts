// Time series from the telemetry API as [unix seconds, value] pairs. The API answers
// [{metric, step, source, points: [[iso time, value], ...]}, ...] (one entry per requested metric); the
// normaliser also takes bare [[t, v], ...] or [{t|at|bucket, v|value}, ...] lists.
export type Point = [number, number | null];

const TIME_KEYS = ["t", "at", "ts", "time", "timestamp", "bucket"];
const VALUE_KEYS = ["v", "value", "avg", "mean", "y"];

function toSeconds(raw: unknown): number | null {
  if (typeof raw === "number") return raw > 1e12 ? raw / 1000 : raw;
  if (typeof raw === "string") {
    const ms = Date.parse(raw);
    return Number.isNaN(ms) ? null : ms / 1000;
  }
  return null;
}

function toValue(raw: unknown): number | null {
  if (raw === null || raw === undefined || raw === "") return null;
  const value = typeof raw === "number" ? raw : Number(raw);
  return Number.isFinite(value) ? value : null;
}

function pick(record: Record<string, unknown>, keys: string[]): unknown {
  for (const key of keys) if (key in record) return record[key];
  return undefined;
}

function isSeriesEntry(item: unknown): item is { metric?: string; points: unknown } {
  return Boolean(item && typeof item === "object" && !Array.isArray(item) && "points" in (item as object));
}

/** Several metrics in one answer: [{metric, points}, ...] → {metric: points}. */
export function normaliseSeriesSet(data: unknown, metrics: string[]): Record<string, Point[]> {
  // The schema calls the answer a page ({results}); the server sends the bare list. Take either.
  if (data && typeof data === "object" && !Array.isArray(data) && Array.isArray((data as { results?: unknown }).results)) {
    data = (data as { results: unknown[] }).results;
  }
  const out: Record<string, Point[]> = Object.fromEntries(metrics.map((metric) => [metric, [] as Point[]]));
  if (Array.isArray(data) && data.some(isSeriesEntry)) {
    for (const entry of data.filter(isSeriesEntry)) {
      if (entry.metric && entry.metric in out) out[entry.metric] = normaliseSeries(entry.points);
    }
    return out;
  }
  for (const metric of metrics) out[metric] = normaliseSeries(data, metric);
  return out;
}

export function normaliseSeries(data: unknown, metric?: string): Point[] {
  if (Array.isArray(data) && data.some(isSeriesEntry)) {
    const entry = data.filter(isSeriesEntry).find((e) => !metric || e.metric === metric);
    return entry ? normaliseSeries(entry.points) : [];
  }
  let list: unknown = data;
  if (list && !Array.isArray(list) && typeof list === "object") {
    const record = list as Record<string, unknown>;
    list = record.points ?? record.data ?? record.values ?? record.series ?? record.results ?? [];
    if (metric && list && !Array.isArray(list) && typeof list === "object") {
      list = (list as Record<string, unknown>)[metric] ?? [];
    }
  }
  if (!Array.isArray(list)) return [];
  const points: Point[] = [];
  for (const item of list) {
    let time: number | null = null;
    let value: number | null = null;
    if (Array.isArray(item)) {
      time = toSeconds(item[0]);
      value = toValue(item[1]);
    } else if (item && typeof item === "object") {
      const record = item as Record<string, unknown>;
      time = toSeconds(pick(record, TIME_KEYS));
      value = toValue(metric && metric in record ? record[metric] : pick(record, VALUE_KEYS));
    }
    if (time !== null) points.push([time, value]);
  }
  return points.sort((a, b) => a[0] - b[0]);
}

export function seriesStats(points: Point[]): { min: number | null; max: number | null; last: number | null } {
  const values = points.map((p) => p[1]).filter((v): v is number => v !== null);
  if (!values.length) return { min: null, max: null, last: null };
  return { min: Math.min(...values), max: Math.max(...values), last: values[values.length - 1] };
}
