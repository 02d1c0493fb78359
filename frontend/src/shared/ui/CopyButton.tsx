import { useState } from "react";
import { useTranslation } from "react-i18next";

async function copyText(text: string): Promise<boolean> {
  try {
    if (navigator.clipboard?.writeText) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall back below: clipboard API needs a secure context (plain http on a LAN address is not one)
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.appendChild(area);
  area.select();
  let ok: boolean;
  try {
    ok = document.execCommand("copy");
  } catch {
    ok = false;
  }
  document.body.removeChild(area);
  return ok;
}

export function CopyButton({ text, label }: { text: string; label?: string }) {
  const { t } = useTranslation();
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  return (
    <button
      type="button"
      className="btn"
      onClick={async () => {
        setState((await copyText(text)) ? "copied" : "failed");
        window.setTimeout(() => setState("idle"), 2500);
      }}
    >
      {state === "copied" ? t("action.copied") : state === "failed" ? t("action.copyFailed") : label ?? t("action.copy")}
    </button>
  );
}
