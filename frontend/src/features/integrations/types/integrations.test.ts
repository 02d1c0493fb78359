import { describe, expect, it } from "vitest";
import { canRetry, configFrom, matchSummary, parseIds, type ConfigFieldSpec } from "./integrations";

const field = (name: string, type: string): ConfigFieldSpec => ({ name, type, required: false, default: null, help: "", choices: [] });

describe("integration helpers", () => {
  it("sends only the settings filled in, typed for their field", () => {
    const fields = [field("url", "URLField"), field("to", "ListField"), field("smtp_port", "IntegerField"),
      field("include_evidence", "BooleanField"), field("ca_bundle", "CharField")];
    expect(configFrom(fields, { url: " https://x.example ", to: "a@b.c, d@e.f", smtp_port: "2525", include_evidence: false, ca_bundle: "" }))
      .toEqual({ url: "https://x.example", to: ["a@b.c", "d@e.f"], smtp_port: 2525, include_evidence: false });
  });

  it("summarises a rule's match and says when it matches everything", () => {
    expect(matchSummary({ responsible_parties: ["provider"], severities: ["critical", "warning"], pools: [] }))
      .toBe("responsible_parties: provider; severities: critical, warning");
    expect(matchSummary({})).toBeNull();
  });

  it("reads ids and refuses anything else", () => {
    expect(parseIds("3, 4")).toEqual([3, 4]);
    expect(parseIds("3, x")).toBeNull();
    expect(parseIds("")).toEqual([]);
  });

  it("offers retry for dead and waiting messages only", () => {
    expect(canRetry("dead")).toBe(true);
    expect(canRetry("retrying")).toBe(true);
    expect(canRetry("delivered")).toBe(false);
    expect(canRetry("sending")).toBe(false);
  });
});
