// Test helpers: render inside the app's providers with a fake API answering from a route table.
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render } from "@testing-library/react";
import type { ReactElement } from "react";
import { MemoryRouter } from "react-router";
import { vi } from "vitest";
import type { Me, Role } from "@/shared/api/types";

export interface FakeRequest {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body: unknown;
}

type Handler = (request: FakeRequest) => unknown;
/** "GET /api/v1/nodes/" → a body (200), or a `[status, body]` pair from `reply()`. */
export type Routes = Record<string, Handler | object | string | number | boolean | null>;

const REPLY = Symbol("reply");
export function reply(status: number, body: unknown = null) {
  return { [REPLY]: true, status, body };
}

export function userWithRole(role: Role): Me {
  return { id: 1, username: `${role}-user`, email: "", role, is_superuser: false };
}

/** Stub fetch: each call is matched on "METHOD path" (query string ignored); unknown paths answer 404 HTML.
 * The API client sends a Request; `headers` are keyed in lower case, as fetch's Headers are. */
export function fakeApi(routes: Routes) {
  const calls: FakeRequest[] = [];
  const fetchMock = vi.fn(async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = input instanceof Request ? input : new Request(new URL(String(input), "http://console.test"), init);
    const url = new URL(request.url);
    const method = request.method.toUpperCase();
    const headers = Object.fromEntries(request.headers.entries());
    const text = await request.text();
    const faked: FakeRequest = { method, url, headers, body: text ? JSON.parse(text) : undefined };
    calls.push(faked);
    const key = `${method} ${url.pathname}`;
    if (!(key in routes)) return new Response("<h1>Not Found</h1>", { status: 404, headers: { "Content-Type": "text/html" } });
    const route = routes[key];
    let result = typeof route === "function" ? (route as Handler)(faked) : route;
    let status = 200;
    if (result && typeof result === "object" && REPLY in (result as object)) {
      status = (result as { status: number }).status;
      result = (result as { body: unknown }).body;
    }
    if (status === 204) return new Response(null, { status });
    return new Response(JSON.stringify(result), { status, headers: { "Content-Type": "application/json" } });
  });
  vi.stubGlobal("fetch", fetchMock);
  return { calls, fetchMock };
}

export function testQueryClient(): QueryClient {
  return new QueryClient({
    defaultOptions: { queries: { retry: false, refetchInterval: false, refetchOnWindowFocus: false, staleTime: Infinity }, mutations: { retry: false } },
  });
}

export function renderWithProviders(ui: ReactElement, { route = "/", role }: { route?: string; role?: Role } = {}) {
  const client = testQueryClient();
  if (role) client.setQueryData(["auth", "session"], { authenticated: true, user: userWithRole(role) });
  const result = render(
    <QueryClientProvider client={client}>
      <MemoryRouter initialEntries={[route]}>{ui}</MemoryRouter>
    </QueryClientProvider>,
  );
  return { ...result, client };
}
