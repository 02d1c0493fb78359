import { QueryObserver } from "@tanstack/react-query";
import { describe, expect, it } from "vitest";
import i18n from "@/shared/i18n/i18n";
import { createQueryClient, refetchOnLanguageChange } from "./queryClient";

describe("query client", () => {
  it("refetches server texts after a language switch, and stops listening when asked", async () => {
    const queryClient = createQueryClient();
    const languages: string[] = [];
    const observer = new QueryObserver(queryClient, {
      queryKey: ["findings"], refetchInterval: false, staleTime: Infinity,
      queryFn: async () => { languages.push(i18n.language); return languages.length; },
    });
    const unsubscribe = observer.subscribe(() => undefined);
    const stop = refetchOnLanguageChange(queryClient, i18n);
    try {
      await expect.poll(() => languages).toEqual(["en"]);
      await i18n.changeLanguage("zh-CN");
      await expect.poll(() => languages).toEqual(["en", "zh-CN"]);
      stop();
      await i18n.changeLanguage("en");
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(languages).toEqual(["en", "zh-CN"]);
    } finally {
      unsubscribe();
      await i18n.changeLanguage("en");
      queryClient.clear();
    }
  });
});
