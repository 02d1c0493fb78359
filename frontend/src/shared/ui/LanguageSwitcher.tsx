import { useTranslation } from "react-i18next";
import { LANGUAGES } from "@/shared/i18n/i18n";

export function LanguageSwitcher() {
  const { t, i18n } = useTranslation();
  return (
    <label className="lang-switch">
      <span className="visually-hidden">{t("nav.language")}</span>
      <select
        aria-label={t("nav.language")}
        value={LANGUAGES.some((l) => l.code === i18n.language) ? i18n.language : "en"}
        onChange={(event) => void i18n.changeLanguage(event.target.value)}
      >
        {LANGUAGES.map((lang) => (
          <option key={lang.code} value={lang.code} lang={lang.code}>
            {lang.label}
          </option>
        ))}
      </select>
    </label>
  );
}
