import { useTranslation } from "react-i18next";
import { formatNumber } from "@/shared/lib/format";

interface PaginationProps {
  page: number;
  pageSize: number;
  count: number;
  onPage: (page: number) => void;
  label: string;
}

export function Pagination({ page, pageSize, count, onPage, label }: PaginationProps) {
  const { t } = useTranslation();
  const pages = Math.max(1, Math.ceil(count / pageSize));
  const first = count === 0 ? 0 : (page - 1) * pageSize + 1;
  const last = Math.min(count, page * pageSize);
  return (
    <nav className="pagination" aria-label={label}>
      <span className="pagination__summary" aria-live="polite">
        {t("pagination.summary", { first: formatNumber(first), last: formatNumber(last), count: formatNumber(count) })}
      </span>
      <button type="button" className="btn btn--small" onClick={() => onPage(1)} disabled={page <= 1}
        aria-label={t("pagination.first")}>«</button>
      <button type="button" className="btn btn--small" onClick={() => onPage(page - 1)} disabled={page <= 1}
        aria-label={t("pagination.previous")}>‹</button>
      <span className="pagination__page">{t("pagination.page", { page: formatNumber(page), pages: formatNumber(pages) })}</span>
      <button type="button" className="btn btn--small" onClick={() => onPage(page + 1)} disabled={page >= pages}
        aria-label={t("pagination.next")}>›</button>
      <button type="button" className="btn btn--small" onClick={() => onPage(pages)} disabled={page >= pages}
        aria-label={t("pagination.last")}>»</button>
    </nav>
  );
}
