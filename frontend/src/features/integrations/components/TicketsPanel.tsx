// The external tickets opened for a node's findings and incidents (or for one incident), with ids and links.
import { useTranslation } from "react-i18next";
import { Can } from "@/shared/auth/Authorization";
import { formatDateTime } from "@/shared/lib/format";
import { Badge } from "@/shared/ui/Badge";
import { Panel } from "@/shared/ui/Panel";
import { QueryState } from "@/shared/ui/QueryState";
import { useAcknowledgeTicket, useTickets, type TicketsOf } from "../api/integrations";
import { ticketStateTone, type Ticket } from "../types/integrations";

export function TicketLink({ ticket }: { ticket: Pick<Ticket, "external_id" | "external_url" | "key"> }) {
  const label = ticket.external_id || ticket.key;
  return ticket.external_url
    ? <a href={ticket.external_url} target="_blank" rel="noreferrer">{label}</a>
    : <code>{label}</code>;
}

/** Operators acknowledge an open ticket: PagerDuty and Opsgenie stop paging, ticketing systems get a note. */
function AcknowledgeButton({ ticket }: { ticket: Ticket }) {
  const { t } = useTranslation();
  const acknowledge = useAcknowledgeTicket();
  if (ticket.state !== "opening" && ticket.state !== "open") return null;
  if (acknowledge.isSuccess) return <span className="small" role="status">{t("integrations.acknowledgeQueued")}</span>;
  return (
    <Can role="operator">
      <button type="button" className="btn btn--small" disabled={acknowledge.isPending}
        aria-label={t("integrations.acknowledgeAria", { key: ticket.external_id || ticket.key })}
        onClick={() => acknowledge.mutate({ id: ticket.id, note: "" })}>
        {t("integrations.acknowledge")}
      </button>
      {acknowledge.isError ? <div className="field__error" role="alert">{acknowledge.error.message}</div> : null}
    </Can>
  );
}

export function TicketsPanel({ of }: { of: TicketsOf }) {
  const { t } = useTranslation();
  const tickets = useTickets(of);
  return (
    <Panel title={t("integrations.tickets")} testId="tickets-panel">
      <QueryState query={tickets} what={t("integrations.tickets")} isEmpty={(d) => d.results.length === 0}
        empty={"node" in of ? t("integrations.noTickets") : t("integrations.noIncidentTickets")}>
        {(data) => (
          <table className="table table--compact">
            <caption className="visually-hidden">{t("integrations.tickets")}</caption>
            <thead>
              <tr>
                <th scope="col">{t("integrations.ticket")}</th>
                <th scope="col">{t("integrations.integration")}</th>
                <th scope="col">{t("integrations.state")}</th>
                <th scope="col">{t("integrations.opened")}</th>
                <th scope="col">{t("integrations.subject")}</th>
                <th scope="col"><span className="visually-hidden">{t("integrations.actions")}</span></th>
              </tr>
            </thead>
            <tbody>
              {data.results.map((ticket) => (
                <tr key={ticket.id}>
                  <td><TicketLink ticket={ticket} /></td>
                  <td>{ticket.integration_name}</td>
                  <td><Badge tone={ticketStateTone(ticket.state)}>{t(`integrations.ticketState.${ticket.state}`)}</Badge></td>
                  <td>{formatDateTime(ticket.opened_at)}</td>
                  <td className="small">{ticket.title || ticket.key}</td>
                  <td><AcknowledgeButton ticket={ticket} /></td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </QueryState>
    </Panel>
  );
}
