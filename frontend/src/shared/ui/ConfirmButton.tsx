// A destructive action that asks first, in place (no browser dialog): the button turns into a warning with
// "yes" and "cancel"; the server's refusal, if any, is shown right there.
import { useState } from "react";
import { useTranslation } from "react-i18next";

export function ConfirmButton({ label, ariaLabel, warning, confirmLabel, onConfirm, pending = false, error, testId }: {
  label: string;
  /** Names the object, e.g. "Delete baseline h100"; also labels the confirmation group. */
  ariaLabel: string;
  /** What happens, e.g. "nodes of this pool are no longer checked for drift". */
  warning?: string;
  confirmLabel?: string;
  onConfirm: () => void;
  pending?: boolean;
  error?: unknown;
  testId?: string;
}) {
  const { t } = useTranslation();
  const [confirming, setConfirming] = useState(false);
  if (!confirming) {
    return <button type="button" className="btn btn--small" aria-label={ariaLabel} data-testid={testId} onClick={() => setConfirming(true)}>{label}</button>;
  }
  return (
    <span role="group" aria-label={ariaLabel} className="confirm" data-testid={testId ? `${testId}-confirm` : undefined}>
      {warning ? <span className="small">{warning}</span> : null}{" "}
      <button type="button" className="btn btn--small btn--danger" disabled={pending} onClick={onConfirm}>{confirmLabel ?? t("action.confirmDelete")}</button>{" "}
      <button type="button" className="btn btn--small" onClick={() => setConfirming(false)}>{t("action.cancel")}</button>
      {error ? <span className="field__error" role="alert">{error instanceof Error ? error.message : String(error)}</span> : null}
    </span>
  );
}
