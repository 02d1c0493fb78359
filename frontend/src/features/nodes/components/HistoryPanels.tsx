// "What changed recently" and "what happened": the node's change log and its events.
import { useTranslation } from "react-i18next";
import { formatDateTime, formatValue } from "@/shared/lib/format";
import { Badge, severityTone } from "@/shared/ui/Badge";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import { useNodeChanges, useNodeEvents } from "../api/getNodeHistory";

export function ChangeLogPanel({ nodeId }: { nodeId: number }) {
  const { t } = useTranslation();
  const changes = useNodeChanges(nodeId);
  return (
    <Panel title={t("changes.title")} testId="changes-panel">
      <QueryState query={changes} what={t("changes.title")} isEmpty={(d) => d.length === 0} empty={t("changes.none")}>
        {(entries) => (
          <ol className="timeline">
            {entries.map((entry, index) => (
              <li key={entry.id ?? index}>
                <time dateTime={entry.at}>{formatDateTime(entry.at)}</time>
                <span>{entry.summary || `${entry.field}: ${formatValue(entry.old)} → ${formatValue(entry.new)}`}</span>
              </li>
            ))}
          </ol>
        )}
      </QueryState>
    </Panel>
  );
}

export function EventsPanel({ nodeId }: { nodeId: number }) {
  const { t } = useTranslation();
  const events = useNodeEvents(nodeId);
  return (
    <Panel title={t("events.title")} testId="events-panel">
      <QueryState query={events} what={t("events.title")} isEmpty={(d) => d.length === 0} empty={t("events.none")}>
        {(list) => (
          <div className="table-wrap">
            <table className="table table--compact">
              <caption className="visually-hidden">{t("events.title")}</caption>
              <thead>
                <tr>
                  <th scope="col">{t("events.at")}</th>
                  <th scope="col">{t("events.kind")}</th>
                  <th scope="col">{t("events.severity")}</th>
                  <th scope="col">{t("events.gpu")}</th>
                  <th scope="col">{t("events.message")}</th>
                </tr>
              </thead>
              <tbody>
                {list.map((event) => (
                  <tr key={event.id}>
                    <td><time dateTime={event.at}>{formatDateTime(event.at)}</time></td>
                    <td>{t(`eventKind.${event.kind}`, { defaultValue: event.kind })}{event.code != null ? ` ${event.code}` : ""}</td>
                    <td><Badge tone={severityTone(event.severity)}>{t(`severity.${event.severity ?? "info"}`, { defaultValue: event.severity ?? "" })}</Badge></td>
                    <td>{event.gpu_index ?? event.pci_bus_id ?? "—"}</td>
                    <td className="wrap">{event.message || "—"}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </QueryState>
    </Panel>
  );
}
