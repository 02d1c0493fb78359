import { describe, expect, it } from "vitest";
import { fakeApi, reply } from "@/testing/render";
import { ApiError, api, asList, buildUrl } from "./client";

describe("api client", () => {
  it("builds query strings, repeating list values and dropping blanks", () => {
    expect(buildUrl("nodes/", { page: 2, search: "", state: undefined, metric: ["a", "b"] })).toBe("/api/v1/nodes/?page=2&metric=a&metric=b");
  });

  it("sends the CSRF cookie back on writes, never on reads", async () => {
    document.cookie = "csrftoken=abc123";
    const fake = fakeApi({ "GET /api/v1/me/": { id: 1 }, "POST /api/v1/tokens/": reply(201, { id: 2 }) });
    await api.get("me/");
    await api.post("tokens/", { name: "x" });
    expect(fake.calls[0].headers["X-CSRFToken"]).toBeUndefined();
    expect(fake.calls[1].headers["X-CSRFToken"]).toBe("abc123");
    expect(fake.calls[1].body).toEqual({ name: "x" });
  });

  it("turns the API's error shape into an ApiError with its fields", async () => {
    fakeApi({ "POST /api/v1/tokens/": reply(400, { error: { code: "invalid", message: "Bad name", fields: { name: ["Too long."] } } }) });
    const error = await api.post("tokens/", {}).catch((e: ApiError) => e) as ApiError;
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ status: 400, code: "invalid", message: "Bad name", fields: { name: ["Too long."] } });
    expect(error.isNotAvailable).toBe(false);
  });

  it("tells a missing endpoint (routing 404) from a missing object (API 404)", async () => {
    fakeApi({ "GET /api/v1/nodes/1/status/": reply(404, { error: { code: "not_found", message: "This node has not reported yet." } }) });
    const missingObject = await api.get("nodes/1/status/").catch((e: ApiError) => e) as ApiError;
    const missingEndpoint = await api.get("nodes/1/triage/").catch((e: ApiError) => e) as ApiError;
    expect(missingObject.isNotFound).toBe(true);
    expect(missingObject.isNotAvailable).toBe(false);
    expect(missingEndpoint.isNotAvailable).toBe(true);
  });

  it("accepts plain lists and pages alike", () => {
    expect(asList([1, 2])).toEqual([1, 2]);
    expect(asList({ count: 1, results: [3] })).toEqual([3]);
    expect(asList(undefined)).toEqual([]);
  });
});
