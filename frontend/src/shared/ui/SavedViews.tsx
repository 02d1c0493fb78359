// Saved views for a list page: pick one to apply its filters, save the current filters under a name, delete.
import { useState } from "react";
import { useTranslation } from "react-i18next";
import { useSearchParams } from "react-router";
import { ApiError } from "@/shared/api/client";
import { useDeleteView, useSaveView, useSavedViews, type SavedViewPage } from "@/shared/api/savedViews";
import { FieldError } from "./FieldError";

/** The current filters as a saved view's query: paging left out. */
export function filterQuery(params: URLSearchParams): string {
  const copy = new URLSearchParams(params);
  copy.delete("page");
  return copy.toString();
}

export function SavedViews({ page }: { page: SavedViewPage }) {
  const { t } = useTranslation();
  const [params, setParams] = useSearchParams();
  const views = useSavedViews(page);
  const save = useSaveView(page);
  const remove = useDeleteView(page);
  const [name, setName] = useState("");
  const current = filterQuery(params);
  const active = (views.data ?? []).find((view) => view.query === current);

  return (
    <div className="saved-views" data-testid="saved-views">
      <label className="field">
        <span>{t("triageList.savedViews")}</span>
        <select value={active ? String(active.id) : ""} onChange={(e) => {
          const view = (views.data ?? []).find((v) => String(v.id) === e.target.value);
          setParams(new URLSearchParams(view ? view.query : ""), { replace: false });
        }}>
          <option value="">{t("triageList.noView")}</option>
          {(views.data ?? []).map((view) => <option key={view.id} value={view.id}>{view.name}</option>)}
        </select>
      </label>
      {active ? (
        <button type="button" className="btn btn--small" onClick={() => remove.mutate(active.id)}
          aria-label={t("triageList.deleteView", { name: active.name })}>
          {t("triageList.deleteViewShort")}
        </button>
      ) : null}
      <form className="saved-views__save" onSubmit={(e) => {
        e.preventDefault();
        if (name.trim()) save.mutate({ name: name.trim(), query: current }, { onSuccess: () => setName("") });
      }}>
        <label className="field">
          <span>{t("triageList.viewName")}</span>
          <input value={name} maxLength={80} onChange={(e) => setName(e.target.value)} />
        </label>
        <button type="submit" className="btn btn--small" disabled={!name.trim() || save.isPending}>{t("triageList.saveView")}</button>
        <FieldError errors={save.error instanceof ApiError ? (save.error.fields.name ?? [save.error.message]) : undefined} />
      </form>
    </div>
  );
}
