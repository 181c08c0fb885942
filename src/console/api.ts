/**
 * The console's connection to its node: the session it logged in to (HttpOnly cookie; the page
 * never sees it) and the typed client of src/client, whose requests carry the session's CSRF
 * token. Nothing is kept in localStorage: a reload asks the node for the session again.
 */
import { WardenClient } from "../client/client.js";
import { WardenHttpError } from "../client/errors.js";
import type { SessionView } from "../client/wire.js";

export const CSRF_HEADER = "x-warden-csrf";

let csrf = "";

/** The window's fetch, same-origin credentials, plus the CSRF header on every request that changes something. */
const sessionFetch: typeof fetch = (input, init = {}) => {
  const method = (init.method ?? "GET").toUpperCase();
  const headers = new Headers(init.headers);
  if (method !== "GET" && method !== "HEAD") headers.set(CSRF_HEADER, csrf);
  return fetch(input, { ...init, headers, credentials: "same-origin" });
};

export const client = new WardenClient({ url: location.origin, fetch: sessionFetch, retries: 1, backoffMs: 200 });

async function sessionRequest(method: "GET" | "POST" | "DELETE", body?: unknown): Promise<Response> {
  const response = await sessionFetch("/ui/session", {
    method,
    headers: body === undefined ? { accept: "application/json" } : { accept: "application/json", "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!response.ok) {
    const problem = (await response.json().catch(() => ({ code: `http-${response.status}`, detail: response.statusText }))) as { code: string; detail?: string };
    throw new WardenHttpError(response.status, problem, { method, path: "/ui/session" });
  }
  return response;
}

/** The current session, or undefined when the browser has none. */
export async function currentSession(): Promise<SessionView | undefined> {
  try {
    const session = (await (await sessionRequest("GET")).json()) as SessionView;
    csrf = session.csrf;
    return session;
  } catch (error) {
    if (error instanceof WardenHttpError && error.status === 401) return undefined;
    throw error;
  }
}

export async function logIn(body: { login: string } | { token: string }): Promise<SessionView> {
  const session = (await (await sessionRequest("POST", body)).json()) as SessionView;
  csrf = session.csrf;
  return session;
}

export async function logOut(): Promise<void> {
  await sessionRequest("DELETE");
  csrf = "";
}

/** An error as the console shows it: the node's message and its stable code. */
export function describeError(error: unknown): { message: string; code: string } {
  if (error instanceof WardenHttpError) return { message: error.message, code: error.code };
  if (error instanceof Error) return { message: error.message, code: (error as { code?: string }).code ?? "error" };
  return { message: String(error), code: "error" };
}
