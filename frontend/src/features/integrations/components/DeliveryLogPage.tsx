// The delivery log: every message to every integration — what was sent, the answer, tries, the next try,
// dead letters — with the requests of each try on demand, and "retry" for operators.
import { Fragment, useState } from "react";
import { useTranslation } from "react-i18next";
import { Link } from "react-router";
import { Can } from "@/shared/auth/Authorization";
import { useUrlState } from "@/shared/hooks/useUrlState";
import { formatDateTime, formatRelative } from "@/shared/lib/format";
import { Badge } from "@/shared/ui/Badge";
import { Pagination } from "@/shared/ui/Pagination";
import { Panel } from "@/shared/ui/Panel";
import { ErrorState, Loading, QueryState } from "@/shared/ui/QueryState";
import { DELIVERIES_PAGE_SIZE, useDeliveries, useDelivery, useIntegrations, useRetryDelivery } from "../api/integrations";
import { canRetry, MESSAGE_STATES, messageStateTone, type Delivery, type DeliveryAttempt } from "../types/integrations";

interface Exchange {
  method?: string;
  url?: string;
  status?: number;
  error?: string;
  duration_ms?: number;
  body?: string;
  response?: string;
}

function AttemptRow({ attempt }: { attempt: DeliveryAttempt }) {
  const { t } = useTranslation();
  const exchanges = (Array.isArray(attempt.exchanges) ? attempt.exchanges : []) as Exchange[];
  return (
    <li>
      <strong>#{attempt.number}</strong> {formatDateTime(attempt.started_at)}{" "}
      <Badge tone={attempt.outcome === "delivered" ? "good" : attempt.outcome === "dead" ? "bad" : "warn"}>
        {t(`integrations.outcome.${attempt.outcome}`)}
      </Badge>
      {attempt.status_code ? ` HTTP ${attempt.status_code}` : ""}
      {attempt.retry_after_s != null ? ` · Retry-After ${attempt.retry_after_s} s` : ""}
      {attempt.error ? <div className="small">{attempt.error}</div> : null}
      {exchanges.length > 0 ? (
        <ul className="small mono">
          {exchanges.map((exchange, index) => (
            <li key={index}>
              {exchange.method} {exchange.url} → {exchange.status ?? exchange.error}
              {exchange.duration_ms != null ? ` (${exchange.duration_ms} ms)` : ""}
            </li>
          ))}
        </ul>
      ) : null}
    </li>
  );
}

function DeliveryDetailRow({ id, columns }: { id: number; columns: number }) {
  const { t } = useTranslation();
  const detail = useDelivery(id);
  let body;
  if (detail.isPending) body = <Loading />;
  else if (detail.isError) body = <ErrorState error={detail.error} />;
  else {
    const data = detail.data;
    const payload = (data.payload ?? {}) as { body?: string };
    body = (
      <div data-testid={`delivery-detail-${id}`}>
        <p className="small">{t("integrations.dedupKey")}: <code>{data.dedup_key}</code>
          {data.held_behind ? <> · {t("integrations.heldBehind", { id: data.held_behind })}</> : null}</p>
        {payload.body ? <pre className="small mono pre-wrap">{payload.body}</pre> : null}
        <h3 className="small">{t("integrations.attempts")}</h3>
        {data.attempt_log.length
          ? <ol className="plain-list">{data.attempt_log.map((a) => <AttemptRow key={a.number + a.started_at} attempt={a} />)}</ol>
          : <p className="small muted">{t("integrations.noAttempts")}</p>}
      </div>
    );
  }
  return <tr><td colSpan={columns}>{body}</td></tr>;
}

function RetryButton({ delivery }: { delivery: Delivery }) {
  const { t } = useTranslation();
  const retry = useRetryDelivery();
  if (!canRetry(delivery.state)) return null;
  return (
    <Can role="operator">
      <button type="button" className="btn btn--small" disabled={retry.isPending}
        aria-label={t("integrations.retryAria", { id: delivery.id })} onClick={() => retry.mutate(delivery.id)}>
        {t("integrations.retry")}
      </button>
      {retry.isError ? <div className="field__error" role="alert">{retry.error.message}</div> : null}
    </Can>
  );
}

const COLUMNS = 10;

export function DeliveryLogPage() {
  const { t } = useTranslation();
  const [state, setState] = useUrlState(["integration", "state", "page"] as const);
  const page = Math.max(1, Number(state.page) || 1);
  const deliveries = useDeliveries({ integration: state.integration, state: state.state, page });
  const integrations = useIntegrations();
  const [open, setOpen] = useState<number | null>(null);
  return (
    <div className="page">
      <h1>{t("integrations.deliveryLog")}</h1>
      <p className="muted"><Link to="/integrations">{t("integrations.back")}</Link></p>
      <div className="filters" role="search" aria-label={t("integrations.filters")}>
        <label className="field">
          <span>{t("integrations.integration")}</span>
          <select value={state.integration} onChange={(e) => setState({ integration: e.target.value })}>
            <option value="">{t("filter.all")}</option>
            {(integrations.data ?? []).map((i) => <option key={i.id} value={i.id}>{i.name}</option>)}
          </select>
        </label>
        <label className="field">
          <span>{t("integrations.state")}</span>
          <select value={state.state} onChange={(e) => setState({ state: e.target.value })}>
            <option value="">{t("filter.all")}</option>
            {MESSAGE_STATES.map((s) => <option key={s} value={s}>{t(`integrations.messageState.${s}`)}</option>)}
          </select>
        </label>
      </div>
      <Panel title={t("integrations.messages")}>
        <QueryState query={deliveries} what={t("integrations.deliveryLog")} isEmpty={(d) => d.results.length === 0}
          empty={t("integrations.noMessages")}>
          {(data) => (
            <>
              <div className="table-wrap">
                <table className="table table--compact" data-testid="deliveries">
                  <caption className="visually-hidden">{t("integrations.messages")}</caption>
                  <thead>
                    <tr>
                      <th scope="col">{t("integrations.created")}</th>
                      <th scope="col">{t("integrations.integration")}</th>
                      <th scope="col">{t("integrations.event")}</th>
                      <th scope="col">{t("integrations.message")}</th>
                      <th scope="col">{t("integrations.ticket")}</th>
                      <th scope="col">{t("integrations.state")}</th>
                      <th scope="col">{t("integrations.tries")}</th>
                      <th scope="col">{t("integrations.response")}</th>
                      <th scope="col">{t("integrations.nextTry")}</th>
                      <th scope="col"><span className="visually-hidden">{t("integrations.actions")}</span></th>
                    </tr>
                  </thead>
                  <tbody>
                    {data.results.map((delivery) => (
                      <Fragment key={delivery.id}>
                        <tr>
                          <td title={formatDateTime(delivery.created_at)}>{formatRelative(delivery.created_at)}</td>
                          <td>{delivery.integration_name}</td>
                          <td className="small">{delivery.event_kind} · {delivery.action}</td>
                          <td>{delivery.title}{delivery.last_error
                            ? <div className="small muted">{delivery.last_error}</div> : null}</td>
                          <td className="small">{delivery.ticket
                            ? (delivery.ticket.external_url
                              ? <a href={delivery.ticket.external_url} target="_blank" rel="noreferrer">{delivery.ticket.external_id || delivery.ticket.key}</a>
                              : <code>{delivery.ticket.external_id || delivery.ticket.key}</code>)
                            : "—"}</td>
                          <td><Badge tone={messageStateTone(delivery.state)}>{t(`integrations.messageState.${delivery.state}`)}</Badge></td>
                          <td>{delivery.attempts}</td>
                          <td>{delivery.last_status_code ?? "—"}</td>
                          <td>{delivery.state === "retrying" || delivery.state === "pending"
                            ? formatDateTime(delivery.next_attempt_at) : "—"}</td>
                          <td>
                            <button type="button" className="btn btn--small" aria-expanded={open === delivery.id}
                              onClick={() => setOpen(open === delivery.id ? null : delivery.id)}>
                              {open === delivery.id ? t("integrations.hide") : t("integrations.details")}
                            </button>{" "}
                            <RetryButton delivery={delivery} />
                          </td>
                        </tr>
                        {open === delivery.id ? <DeliveryDetailRow id={delivery.id} columns={COLUMNS} /> : null}
                      </Fragment>
                    ))}
                  </tbody>
                </table>
              </div>
              {data.count > DELIVERIES_PAGE_SIZE ? (
                <Pagination page={page} pageSize={DELIVERIES_PAGE_SIZE} count={data.count} label={t("integrations.pages")}
                  onPage={(next) => setState({ page: next })} />
              ) : null}
            </>
          )}
        </QueryState>
      </Panel>
    </div>
  );
}
