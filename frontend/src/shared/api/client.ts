// The one API client: openapi-fetch over the generated `paths`, so every path, path parameter, query
// parameter, request body and response is typed by the server's OpenAPI schema. The shared behaviour lives
// in middleware: same-origin cookies, the CSRF header on writes, the console's language, one ApiError for every
// failure, and the session-expiry signal on 401. Nothing else in the console calls fetch.
import createClient, { type Middleware } from "openapi-fetch";
import i18n from "../i18n/i18n";
import type { components, paths } from "./schema";

export const API_BASE = "/api/v1";

/** Short names for the schema's components; never hand-copy a payload type, alias it from here. */
export type Schemas = components["schemas"];

/** The query parameters a GET path takes, from the schema (a list filter's parameters, for instance). */
export type QueryOf<P extends keyof paths> = paths[P] extends { get: { parameters: { query?: infer Q } } }
  ? NonNullable<Q> : never;

export interface ApiErrorBody {
  error?: { code?: string; message?: string; fields?: Record<string, string[] | string> };
  detail?: string;
}

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly fields: Record<string, string[]>;
  /** True when the API itself answered with its error shape (a 404 then means "no such object"). */
  readonly fromApi: boolean;

  constructor(status: number, code: string, message: string, fields: Record<string, string[]> = {}, fromApi = false) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.fields = fields;
    this.fromApi = fromApi;
  }

  /** The endpoint does not exist on this server (yet): panels show "not available" instead of an error.
   * A 404 without the API's error shape comes from URL routing, i.e. the endpoint is missing. */
  get isNotAvailable(): boolean {
    return (this.status === 404 && !this.fromApi) || this.status === 405 || this.status === 501;
  }

  /** The API says the object is not there (e.g. "this node has not reported yet"). */
  get isNotFound(): boolean {
    return this.status === 404 && this.fromApi;
  }
}

export type QueryValue = string | number | boolean | null | undefined | ReadonlyArray<string | number | boolean>;

/** Blank values are left out (an empty filter means "no filter"); lists repeat the key (`metric=a&metric=b`),
 * which is how django-filter and the series endpoints read them. */
export function serializeQuery(query: Record<string, unknown> | undefined): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {}) as Array<[string, QueryValue]>) {
    if (value === undefined || value === null || value === "") continue;
    if (Array.isArray(value)) value.forEach((item) => params.append(key, String(item)));
    else params.append(key, String(value));
  }
  return params.toString();
}

export function readCookie(name: string): string | null {
  if (typeof document === "undefined") return null;
  for (const part of document.cookie.split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return decodeURIComponent(rest.join("="));
  }
  return null;
}

function normaliseFields(fields: unknown): Record<string, string[]> {
  if (!fields || typeof fields !== "object") return {};
  const out: Record<string, string[]> = {};
  for (const [key, value] of Object.entries(fields as Record<string, unknown>)) {
    out[key] = Array.isArray(value) ? value.map(String) : [String(value)];
  }
  return out;
}

async function toApiError(response: Response): Promise<ApiError> {
  // Not every error is the API's JSON (a proxy's 502 page, Django's routing 404): then there is no body.
  const body = (await response.clone().json().catch(() => null)) as ApiErrorBody | null;
  const message = body?.error?.message ?? body?.detail ?? (response.statusText || `HTTP ${response.status}`);
  return new ApiError(response.status, body?.error?.code ?? `http_${response.status}`, message,
    normaliseFields(body?.error?.fields), Boolean(body?.error || body?.detail));
}

type UnauthorizedListener = () => void;
const unauthorizedListeners = new Set<UnauthorizedListener>();

/** The app listens here to send the user back to the login page when the session expires. */
export function onUnauthorized(listener: UnauthorizedListener): () => void {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** Django's CSRF check: writes echo the csrftoken cookie (set by GET /auth/session/) in a header. */
const csrfMiddleware: Middleware = {
  onRequest({ request }) {
    if (SAFE_METHODS.has(request.method)) return undefined;
    const csrf = readCookie("csrftoken");
    if (csrf) request.headers.set("X-CSRFToken", csrf);
    return request;
  },
};

/** The server writes findings, triage headlines, recommended actions and the rule catalogue in the language the
 * request asks for: every call asks for the console's current language (en / zh-CN), read per call. */
const languageMiddleware: Middleware = {
  onRequest({ request }) {
    request.headers.set("Accept-Language", i18n.language || "en");
    return request;
  },
};

/** Every failure becomes an ApiError thrown from the call, so a resolved call always carries its data and
 * TanStack Query sees one error type. A 401 also tells the app that the session is gone. */
const errorMiddleware: Middleware = {
  async onResponse({ response }) {
    if (!response.ok) {
      const error = await toApiError(response);
      if (response.status === 401) unauthorizedListeners.forEach((listener) => listener());
      throw error;
    }
    const type = response.headers.get("Content-Type") ?? "";
    if (response.status !== 204 && response.headers.get("Content-Length") !== "0" && !type.includes("json")) {
      // A proxy's or a login page's HTML is not this API answering; say so instead of a JSON SyntaxError.
      throw new ApiError(response.status, "unexpected_response", `Expected JSON, got ${type || "no content type"}`);
    }
    return undefined;
  },
  onError({ error }) {
    if ((error as Error)?.name === "AbortError") return undefined;
    return new ApiError(0, "network", (error as Error)?.message || "Network error");
  },
};

// openapi-fetch builds a Request, which needs an absolute URL outside the browser (tests); in the browser
// this is the page's own origin, so the console stays same-origin.
const origin = typeof window !== "undefined" && window.location?.origin && window.location.origin !== "null"
  ? window.location.origin : "http://localhost";

export const client = createClient<paths>({
  baseUrl: origin,
  credentials: "same-origin",
  headers: { Accept: "application/json" },
  querySerializer: serializeQuery,
  // Looked up per call, not captured once, so a stubbed fetch (tests) is honoured.
  fetch: (request: Request) => globalThis.fetch(request),
});
client.use(languageMiddleware, csrfMiddleware, errorMiddleware);

/** openapi-fetch answers `{data}` or `{error}`; the middleware has already thrown for every error, so
 * this only narrows the union to the data. Use it around every call: `unwrap(client.GET(...))`. */
export async function unwrap<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data } = await call;
  return data as T;
}

export interface Page<T> {
  count: number;
  next?: string | null;
  previous?: string | null;
  results: T[];
}

/** Some list actions answer a plain array, some a page (and the schema is not always right about which). */
export function asList<T>(data: T[] | Page<T> | null | undefined): T[] {
  if (!data) return [];
  return Array.isArray(data) ? data : (data.results ?? []);
}
