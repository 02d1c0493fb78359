import { describe, expect, it } from "vitest";
import { boolParam, choiceParam, intParam } from "./params";

describe("URL filter values → typed query parameters", () => {
  it("reads numbers and booleans, and treats blank or malformed values as no filter", () => {
    expect(intParam("12")).toBe(12);
    expect(intParam("")).toBeUndefined();
    expect(intParam("abc")).toBeUndefined();
    expect(boolParam("true")).toBe(true);
    expect(boolParam("false")).toBe(false);
    expect(boolParam("")).toBeUndefined();
    expect(boolParam("yes")).toBeUndefined();
  });

  it("passes an allowed choice as a one-element list and drops anything else", () => {
    const states = ["active", "retired"] as const;
    expect(choiceParam(states, "active")).toEqual(["active"]);
    expect(choiceParam(states, "")).toBeUndefined();
    expect(choiceParam(states, "exploded")).toBeUndefined();
  });
});
