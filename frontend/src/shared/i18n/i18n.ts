// i18next with English and Simplified Chinese. The choice is remembered in localStorage and sets <html lang>.
import i18n from "i18next";
import { initReactI18next } from "react-i18next";
import en from "./locales/en";
import zhCN from "./locales/zh-CN";

export const LANGUAGES = [
  { code: "en", label: "English" },
  { code: "zh-CN", label: "简体中文" },
] as const;
export type LanguageCode = (typeof LANGUAGES)[number]["code"];

export const LANGUAGE_STORAGE_KEY = "fleet.console.language";

export function initialLanguage(): LanguageCode {
  try {
    const saved = window.localStorage.getItem(LANGUAGE_STORAGE_KEY);
    if (saved && LANGUAGES.some((lang) => lang.code === saved)) return saved as LanguageCode;
  } catch {
    // storage can be disabled; fall through to the browser's language
  }
  const browser = typeof navigator !== "undefined" ? navigator.language : "en";
  return browser?.toLowerCase().startsWith("zh") ? "zh-CN" : "en";
}

/** The server's name of a console language (Django's LANGUAGES): what its texts are rendered in. */
export const SERVER_LANGUAGE: Record<LanguageCode, string> = { en: "en", "zh-CN": "zh-hans" };

function applyLanguage(code: string): void {
  if (typeof document === "undefined") return;
  document.documentElement.lang = code;
  document.title = i18n.t("app.name");
  // API calls send Accept-Language; links the browser follows itself (evidence and CSV downloads) carry this
  // cookie, which Django's LocaleMiddleware reads first, so they come in the console's language too.
  const server = SERVER_LANGUAGE[code as LanguageCode] ?? "en";
  document.cookie = `django_language=${server}; path=/; SameSite=Lax`;
}

void i18n.use(initReactI18next).init({
  resources: { en: { translation: en }, "zh-CN": { translation: zhCN } },
  lng: initialLanguage(),
  fallbackLng: "en",
  supportedLngs: LANGUAGES.map((lang) => lang.code),
  interpolation: { escapeValue: false }, // React escapes
  returnNull: false,
  initAsync: false,
});
applyLanguage(i18n.language);

i18n.on("languageChanged", (code) => {
  applyLanguage(code);
  try {
    window.localStorage.setItem(LANGUAGE_STORAGE_KEY, code);
  } catch {
    // not remembered when storage is disabled; the switch still applies
  }
});

export default i18n;
