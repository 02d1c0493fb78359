import { formatValue } from "@/shared/lib/format";

/** Evidence as the engine recorded it: values, log lines and timestamps, shown without interpretation. */
export function Evidence({ value }: { value: unknown }) {
  if (value === null || value === undefined || value === "") return null;
  if (Array.isArray(value) && value.every((item) => typeof item === "string")) {
    return <pre className="evidence">{(value as string[]).join("\n")}</pre>;
  }
  if (typeof value === "object" && !Array.isArray(value)) {
    const entries = Object.entries(value as Record<string, unknown>);
    return (
      <dl className="evidence evidence--kv">
        {entries.map(([key, item]) => (
          <div key={key}>
            <dt>{key}</dt>
            <dd>{typeof item === "object" && item !== null ? <code>{JSON.stringify(item)}</code> : formatValue(item)}</dd>
          </div>
        ))}
      </dl>
    );
  }
  return <pre className="evidence">{typeof value === "string" ? value : JSON.stringify(value, null, 2)}</pre>;
}
