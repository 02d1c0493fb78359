import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { renderWithProviders } from "@/testing/render";
import { LanguageSwitcher } from "@/shared/ui/LanguageSwitcher";
import i18n, { LANGUAGE_STORAGE_KEY } from "./i18n";
import en from "./locales/en";
import zhCN from "./locales/zh-CN";
import { useTranslation } from "react-i18next";

/** Flattened keys with plural suffixes folded (English needs _one and _other, Chinese only _other). */
function keys(tree: object, prefix = ""): string[] {
  return Object.entries(tree).flatMap(([key, value]) => {
    const path = prefix ? `${prefix}.${key}` : key;
    return value && typeof value === "object" ? keys(value, path) : [path.replace(/_(one|other|zero|few|many|two)$/, "")];
  });
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.(ts|tsx)$/.test(name) && !/\.test\.tsx?$/.test(name) && !name.endsWith(".d.ts") ? [path] : [];
  });
}

function Greeting() {
  const { t } = useTranslation();
  return <h1>{t("nav.overview")}</h1>;
}

describe("i18n", () => {
  it("has the same keys in English and Simplified Chinese", () => {
    const english = new Set(keys(en));
    const chinese = new Set(keys(zhCN));
    expect([...english].filter((key) => !chinese.has(key))).toEqual([]);
    expect([...chinese].filter((key) => !english.has(key))).toEqual([]);
  });

  it("has every literal key the source uses", () => {
    const english = new Set(keys(en));
    const root = join(process.cwd(), "src");
    const used = new Set<string>();
    for (const file of sourceFiles(root)) {
      for (const match of readFileSync(file, "utf8").matchAll(/\bt\(\s*"([a-zA-Z0-9_.]+)"/g)) used.add(match[1]);
      for (const match of readFileSync(file, "utf8").matchAll(/label: "((?:nav|nodes)\.[a-zA-Z0-9_.]+)"/g)) used.add(match[1]);
    }
    expect(used.size).toBeGreaterThan(100);
    expect([...used].filter((key) => !english.has(key))).toEqual([]);
  });

  it("switches the whole UI to Chinese, remembers the choice and sets <html lang>", async () => {
    const user = userEvent.setup();
    renderWithProviders(<><LanguageSwitcher /><Greeting /></>);
    expect(screen.getByRole("heading")).toHaveTextContent("Overview");
    await user.selectOptions(screen.getByRole("combobox", { name: "Language" }), "zh-CN");
    expect(screen.getByRole("heading")).toHaveTextContent("总览");
    expect(screen.getByRole("combobox", { name: "语言" })).toHaveValue("zh-CN");
    expect(window.localStorage.getItem(LANGUAGE_STORAGE_KEY)).toBe("zh-CN");
    expect(document.documentElement.lang).toBe("zh-CN");
    await user.selectOptions(screen.getByRole("combobox", { name: "语言" }), "en");
    expect(screen.getByRole("heading")).toHaveTextContent("Overview");
  });

  it("translates plurals and interpolations in both languages", async () => {
    expect(i18n.t("stack.drifted", { count: 1 })).toBe("1 field drifted");
    expect(i18n.t("stack.drifted", { count: 3 })).toBe("3 fields drifted");
    await i18n.changeLanguage("zh-CN");
    expect(i18n.t("stack.drifted", { count: 3 })).toBe("3 项偏离基线");
    expect(i18n.t("owner.providerNamed", { name: "阿里云" })).toBe("供应商（阿里云）");
  });
});
