// The node page's header line: its state (cordoned, draining, preempted, …), its open incident, and the
// provider's support contact, which operators and admins can edit in place.
import { useState } from "react";
import { useTranslation } from "react-i18next";
import { Link } from "react-router";
import type { Node } from "@/shared/api/types";
import { ApiError } from "@/shared/api/client";
import { Can } from "@/shared/auth/Authorization";
import { Badge, nodeStateTone } from "@/shared/ui/Badge";
import { FieldError } from "@/shared/ui/FieldError";
import { useUpdateSupportContact } from "../api/getNode";

export interface HeaderIncident { id: number; key: string; state: string }

export function NodeHeader({ node, incident }: { node: Node; incident?: HeaderIncident | null }) {
  const { t } = useTranslation();
  const update = useUpdateSupportContact();
  const [editing, setEditing] = useState(false);
  const [contact, setContact] = useState(node.provider_support_contact ?? "");
  const errors = update.error instanceof ApiError ? (update.error.fields.support_contact ?? [update.error.message]) : undefined;
  return (
    <div className="node-header" data-testid="node-header">
      <span>
        {t("triageList.headerState")}:{" "}
        <Badge tone={nodeStateTone(node.state)}><span data-testid="node-state" data-state={node.state}>{t(`nodeState.${node.state}`, { defaultValue: node.state ?? "" })}</span></Badge>
      </span>
      <span data-testid="node-incident">
        {incident
          ? <Link to={`/incidents/${incident.id}`}>{t("triageList.openIncident", { key: incident.key, state: t(`incidentState.${incident.state}`, { defaultValue: incident.state }) })}</Link>
          : <span className="muted">{t("triageList.noIncident")}</span>}
      </span>
      <span className="node-header__contact" data-testid="support-contact">
        {t("triageList.contactLabel")} ({node.provider_name}):{" "}
        {editing ? (
          <form className="node-header__contact" onSubmit={(e) => {
            e.preventDefault();
            update.mutate({ provider: node.provider, contact: contact.trim() }, { onSuccess: () => setEditing(false) });
          }}>
            <input aria-label={t("triageList.contactLabel")} value={contact} maxLength={200} onChange={(e) => setContact(e.target.value)} />
            <button type="submit" className="btn btn--small" disabled={update.isPending}>{t("triageList.saveContact")}</button>
            <button type="button" className="btn btn--link" onClick={() => setEditing(false)}>{t("triageList.cancel")}</button>
            <FieldError errors={errors} />
          </form>
        ) : (
          <>
            <span data-testid="support-contact-text">{node.provider_support_contact || t("triageList.noContact")}</span>
            {node.site_support_contact ? <span data-testid="site-contact-text"> · {t("triageList.siteContact", { site: node.site_name, contact: node.site_support_contact })}</span> : null}
            <Can>
              <button type="button" className="btn btn--small" onClick={() => { setContact(node.provider_support_contact ?? ""); setEditing(true); }}>
                {t("triageList.editContact")}
              </button>
            </Can>
          </>
        )}
      </span>
    </div>
  );
}
