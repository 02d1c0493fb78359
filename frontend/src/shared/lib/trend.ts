// Fleet chart answers ({series: [{key, points: [[iso, value], ...]}]}) as aligned columns for TimeChart.
export interface TrendAnswer {
  series: { key: string; points: unknown[][] }[];
}

export interface Columns {
  times: number[];
  values: Record<string, (number | null)[]>;
}

function toNumber(raw: unknown): number | null {
  if (raw === null || raw === undefined || raw === "") return null;
  const value = typeof raw === "number" ? raw : Number(raw);
  return Number.isFinite(value) ? value : null;
}

/** Every series on one time axis (the union of their times); a time a series lacks is null there. */
export function trendColumns(answer: TrendAnswer | undefined): Columns {
  const byKey = new Map<string, Map<number, number | null>>();
  const times = new Set<number>();
  for (const entry of answer?.series ?? []) {
    const points = new Map<number, number | null>();
    for (const point of entry.points) {
      const at = Date.parse(String(point[0]));
      if (Number.isNaN(at)) continue;
      points.set(at / 1000, toNumber(point[1]));
      times.add(at / 1000);
    }
    byKey.set(entry.key, points);
  }
  const sorted = [...times].sort((a, b) => a - b);
  const values: Record<string, (number | null)[]> = {};
  for (const [key, points] of byKey) values[key] = sorted.map((at) => points.get(at) ?? null);
  return { times: sorted, values };
}

/** Point lists ([[unix s, value], ...]) of several metrics on one time axis. */
export function alignPoints(byKey: Record<string, [number, number | null][]>): Columns {
  const times = new Set<number>();
  for (const points of Object.values(byKey)) for (const [at] of points) times.add(at);
  const sorted = [...times].sort((a, b) => a - b);
  const values: Record<string, (number | null)[]> = {};
  for (const [key, points] of Object.entries(byKey)) {
    const lookup = new Map(points);
    values[key] = sorted.map((at) => lookup.get(at) ?? null);
  }
  return { times: sorted, values };
}
