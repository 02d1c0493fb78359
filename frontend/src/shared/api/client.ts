// The one API client: same-origin session cookies, the CSRF header on writes, one error shape.
// Every feature's endpoint file calls `api.get/post/patch/delete`; nothing else calls fetch.

export const API_BASE = "/api/v1";

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

export type QueryValue = string | number | boolean | null | undefined | Array<string | number>;
export type Query = Record<string, QueryValue>;

export function buildUrl(path: string, query?: Query): string {
  const url = path.startsWith("/") ? path : `${API_BASE}/${path}`;
  if (!query) return url;
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined || value === null || value === "") continue;
    if (Array.isArray(value)) value.forEach((item) => params.append(key, String(item)));
    else params.append(key, String(value));
  }
  const text = params.toString();
  return text ? `${url}?${text}` : url;
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
  let body: ApiErrorBody | null = null;
  try {
    body = (await response.json()) as ApiErrorBody;
  } catch {
    body = null;
  }
  const message = body?.error?.message ?? body?.detail ?? response.statusText ?? `HTTP ${response.status}`;
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

async function request<T>(method: string, path: string, options: { query?: Query; body?: unknown; signal?: AbortSignal } = {}): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && method !== "HEAD") {
    const csrf = readCookie("csrftoken");
    if (csrf) headers["X-CSRFToken"] = csrf;
  }
  let response: Response;
  try {
    response = await fetch(buildUrl(path, options.query), {
      method,
      headers,
      credentials: "same-origin",
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal: options.signal,
    });
  } catch (error) {
    if ((error as Error)?.name === "AbortError") throw error;
    throw new ApiError(0, "network", (error as Error)?.message || "Network error");
  }
  if (!response.ok) {
    const error = await toApiError(response);
    if (response.status === 401) unauthorizedListeners.forEach((listener) => listener());
    throw error;
  }
  if (response.status === 204) return undefined as T;
  const type = response.headers.get("Content-Type") ?? "";
  if (!type.includes("json")) return (await response.text()) as T;
  return (await response.json()) as T;
}

export const api = {
  get: <T>(path: string, query?: Query, signal?: AbortSignal) => request<T>("GET", path, { query, signal }),
  post: <T>(path: string, body?: unknown) => request<T>("POST", path, { body: body ?? {} }),
  patch: <T>(path: string, body: unknown) => request<T>("PATCH", path, { body }),
  delete: <T = void>(path: string) => request<T>("DELETE", path),
};

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
