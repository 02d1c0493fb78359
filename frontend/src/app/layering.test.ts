// The layering rule in eslint.config.js, run over snippets placed in each layer. no-restricted-paths passes
// silently over imports it cannot resolve, so this also proves that the "@/" alias resolves.
import { ESLint } from "eslint";
import { describe, expect, it } from "vitest";

const eslint = new ESLint({ cwd: process.cwd() });

async function layeringErrors(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath });
  return result.messages.filter((m) => m.ruleId === "import-x/no-restricted-paths").map((m) => m.message);
}

describe("layering (eslint import-x/no-restricted-paths)", () => {
  it("keeps a feature from importing another feature, by alias or relative path", async () => {
    const errors = await layeringErrors("src/features/rules/api/probe.ts", [
      'import { getNode } from "@/features/nodes/api/getNode";',
      'import { logout } from "../../auth/api/logout";',
      "export const probe = [getNode, logout];",
    ].join("\n"));
    expect(errors).toHaveLength(2);
    expect(errors[0]).toContain("Features do not import each other");
  });

  it("lets a feature import itself and shared code", async () => {
    expect(await layeringErrors("src/features/rules/api/probe.ts", [
      'import { getRules } from "./rules";',
      'import { ruleParams } from "../types/rules";',
      'import { client } from "@/shared/api/client";',
      "export const probe = [getRules, ruleParams, client];",
    ].join("\n"))).toEqual([]);
  });

  it("keeps shared code from importing features or the app", async () => {
    const errors = await layeringErrors("src/shared/lib/probe.ts", [
      'import { getNode } from "@/features/nodes/api/getNode";',
      'import { App } from "@/app/App";',
      "export const probe = [getNode, App];",
    ].join("\n"));
    expect(errors).toHaveLength(2);
  });

  it("lets the app compose features", async () => {
    expect(await layeringErrors("src/app/routes/probe.ts", [
      'import { getNode } from "@/features/nodes/api/getNode";',
      'import { getRules } from "@/features/rules/api/rules";',
      "export const probe = [getNode, getRules];",
    ].join("\n"))).toEqual([]);
  });
});
