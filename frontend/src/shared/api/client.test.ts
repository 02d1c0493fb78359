import { describe, expect, it, vi } from "vitest";
import { fakeApi, reply } from "@/testing/render";
import i18n from "../i18n/i18n";
import { ApiError, asList, client, onUnauthorized, serializeQuery, unwrap } from "./client";

describe("api client", () => {
  it("builds query strings, repeating list values and dropping blanks", () => {
    expect(serializeQuery({ page: 2, search: "", state: undefined, silent: false, metric: ["a", "b"] }))
      .toBe("page=2&silent=false&metric=a&metric=b");
  });

  it("sends typed path and query parameters to the schema's path", async () => {
    const fake = fakeApi({ "GET /api/v1/nodes/7/series/": [] });
    await unwrap(client.GET("/api/v1/nodes/{id}/series/", { params: { path: { id: 7 }, query: { metric: ["a", "b"], step: 60 } } }));
    expect(fake.calls[0].url.pathname).toBe("/api/v1/nodes/7/series/");
    expect(fake.calls[0].url.search).toBe("?metric=a&metric=b&step=60");
    expect(fake.calls[0].headers.accept).toBe("application/json");
  });

  it("asks for the console's current language on every call, reads and writes", async () => {
    const fake = fakeApi({ "GET /api/v1/me/": { id: 1 }, "POST /api/v1/tokens/": reply(201, { id: 2 }) });
    await i18n.changeLanguage("en");
    await unwrap(client.GET("/api/v1/me/"));
    await i18n.changeLanguage("zh-CN");
    try {
      await unwrap(client.GET("/api/v1/me/"));
      await unwrap(client.POST("/api/v1/tokens/", { body: { name: "x", write_enabled: false } }));
    } finally {
      await i18n.changeLanguage("en");
    }
    expect(fake.calls.map((call) => call.headers["accept-language"])).toEqual(["en", "zh-CN", "zh-CN"]);
    // Links the browser follows itself (evidence downloads) carry the server's name of the language.
    expect(document.cookie).toContain("django_language=en");
  });

  it("sends the CSRF cookie back on writes, never on reads", async () => {
    document.cookie = "csrftoken=abc123";
    const fake = fakeApi({ "GET /api/v1/me/": { id: 1 }, "POST /api/v1/tokens/": reply(201, { id: 2 }) });
    await unwrap(client.GET("/api/v1/me/"));
    const created = await unwrap(client.POST("/api/v1/tokens/", { body: { name: "x", write_enabled: false } }));
    expect(created).toEqual({ id: 2 });
    expect(fake.calls[0].headers["x-csrftoken"]).toBeUndefined();
    expect(fake.calls[1].headers["x-csrftoken"]).toBe("abc123");
    expect(fake.calls[1].body).toEqual({ name: "x", write_enabled: false });
  });

  it("turns the API's error shape into an ApiError with its fields", async () => {
    fakeApi({ "POST /api/v1/tokens/": reply(400, { error: { code: "invalid", message: "Bad name", fields: { name: ["Too long."] } } }) });
    const error = await unwrap(client.POST("/api/v1/tokens/", { body: { name: "", write_enabled: false } })).catch((e: ApiError) => e) as ApiError;
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ status: 400, code: "invalid", message: "Bad name", fields: { name: ["Too long."] } });
    expect(error.isNotAvailable).toBe(false);
  });

  it("tells a missing endpoint (routing 404) from a missing object (API 404)", async () => {
    fakeApi({ "GET /api/v1/nodes/1/status/": reply(404, { error: { code: "not_found", message: "This node has not reported yet." } }) });
    const missingObject = await unwrap(client.GET("/api/v1/nodes/{id}/status/", { params: { path: { id: 1 } } }))
      .catch((e: ApiError) => e) as ApiError;
    const missingEndpoint = await unwrap(client.GET("/api/v1/nodes/{node_id}/triage/", { params: { path: { node_id: 1 } } }))
      .catch((e: ApiError) => e) as ApiError;
    expect(missingObject.isNotFound).toBe(true);
    expect(missingObject.isNotAvailable).toBe(false);
    expect(missingEndpoint.isNotAvailable).toBe(true);
  });

  it("tells the app when the session has expired", async () => {
    fakeApi({ "GET /api/v1/me/": reply(401, { error: { code: "not_authenticated", message: "Log in." } }) });
    const listener = vi.fn();
    const stop = onUnauthorized(listener);
    const error = await unwrap(client.GET("/api/v1/me/")).catch((e: ApiError) => e) as ApiError;
    stop();
    expect(error).toMatchObject({ status: 401, code: "not_authenticated" });
    expect(listener).toHaveBeenCalledTimes(1);
  });

  it("reports a network failure as an ApiError and lets an abort through", async () => {
    vi.stubGlobal("fetch", vi.fn(async () => { throw new TypeError("Failed to fetch"); }));
    const error = await unwrap(client.GET("/api/v1/me/")).catch((e: ApiError) => e) as ApiError;
    expect(error).toMatchObject({ status: 0, code: "network", message: "Failed to fetch" });

    vi.stubGlobal("fetch", vi.fn(async () => { throw new DOMException("The operation was aborted.", "AbortError"); }));
    const aborted = await unwrap(client.GET("/api/v1/me/")).catch((e: Error) => e) as Error;
    expect(aborted).not.toBeInstanceOf(ApiError);
    expect(aborted.name).toBe("AbortError");
  });

  it("answers 204 with no data", async () => {
    fakeApi({ "DELETE /api/v1/auth/session/": reply(204) });
    await expect(unwrap(client.DELETE("/api/v1/auth/session/"))).resolves.toBeUndefined();
  });

  it("refuses a success that is not JSON (a proxy's HTML page) with an ApiError", async () => {
    vi.stubGlobal("fetch", vi.fn(async () => new Response("<html></html>", { status: 200, headers: { "Content-Type": "text/html" } })));
    const error = await unwrap(client.GET("/api/v1/me/")).catch((e: ApiError) => e) as ApiError;
    expect(error).toBeInstanceOf(ApiError);
    expect(error.code).toBe("unexpected_response");
  });

  it("accepts plain lists and pages alike", () => {
    expect(asList([1, 2])).toEqual([1, 2]);
    expect(asList({ count: 1, results: [3] })).toEqual([3]);
    expect(asList(undefined)).toEqual([]);
  });
});
