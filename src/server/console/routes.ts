/**
 * The operator console over HTTP (DESIGN.md "Operator console"): its files under /ui/ with a
 * strict Content-Security-Policy, the session a browser logs in to, and the login links
 * `warden console` asks for. Everything the console shows comes from the API (/v1/...), which it
 * calls with its session cookie; the API's own auth hook decides, as for a bearer token.
 */
import type { IncomingHttpHeaders } from "node:http";
import type { FastifyReply, FastifyRequest } from "fastify";
import { LoginLink, SESSION_COOKIE, SessionBody, SessionView, type SessionView as SessionViewType } from "../../api/console.js";
import { ProblemResponse } from "../../api/problem.js";
import { AuthError, NotFoundError, WardenError } from "../../core/errors.js";
import type { TokenAuthority } from "../auth.js";
import { callerOf, type App } from "../context.js";
import type { ConsoleAsset, ConsoleAssets } from "./assets.js";
import { firstRequestOf, withPreload } from "./preload.js";
import { checkCsrf, cookieValue, SESSION_MS, type ConsoleSession, type ConsoleSessions } from "./sessions.js";

/**
 * No inline script or style, nothing from another origin, never framed. `style-src 'self'` alone
 * would also refuse the style attributes Preact sets; the console sets none.
 */
export const CONSOLE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const IMMUTABLE = "public, max-age=31536000, immutable";

/** Every answer under /ui/ carries these, errors included (DESIGN.md "Operator console"). */
export function securityHeaders(reply: FastifyReply): FastifyReply {
  return reply
    .header("content-security-policy", CONSOLE_CSP)
    .header("x-content-type-options", "nosniff")
    .header("x-frame-options", "DENY")
    .header("referrer-policy", "no-referrer")
    .header("cross-origin-opener-policy", "same-origin");
}

/** Whether a request URL is the console's (`/ui` or under `/ui/`), whose answers carry securityHeaders. */
export function isConsolePath(url: string): boolean {
  const path = url.split("?", 1)[0]!;
  return path === "/ui" || path.startsWith("/ui/");
}

function sendAsset(request: FastifyRequest, reply: FastifyReply, file: ConsoleAsset, cache: string): FastifyReply {
  securityHeaders(reply).type(file.type).header("cache-control", cache).header("vary", "accept-encoding");
  if (/\bgzip\b/.test(String(request.headers["accept-encoding"] ?? ""))) return reply.header("content-encoding", "gzip").send(file.gzip);
  return reply.send(file.body);
}

/**
 * A request that changes something with a cookie must come from a page of this node: a browser
 * sends Origin on every cross-origin POST, so one naming another host is refused before anything
 * (SameSite=Strict already keeps the cookie off such requests; this does not rely on it alone).
 */
export function checkOrigin(headers: IncomingHttpHeaders): void {
  const origin = headers.origin;
  if (origin === undefined) return;
  let same = false;
  try {
    const from = new URL(String(origin));
    // The node speaks plain HTTP: its pages' origin is http://<Host>. Both sides normalized (a
    // default port is dropped from either); the scheme counts, as for any origin.
    same = headers.host !== undefined && from.protocol === "http:" && from.origin === new URL(`http://${headers.host}`).origin;
  } catch {
    same = false;
  }
  if (!same) throw new WardenError("origin-refused", `a console request from ${String(origin)} is refused: only the node's own pages may change anything`, 403);
}

function sessionCookie(id: string, maxAgeS: number): string {
  return `${SESSION_COOKIE}=${id}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAgeS}`;
}

function viewOf(session: ConsoleSession): SessionViewType {
  return { name: session.caller.name, role: session.caller.role, csrf: session.csrf, expires_at: new Date(session.expiresAt).toISOString() };
}

export function consoleRoutes(options: { sessions: ConsoleSessions; authority: TokenAuthority; assets: ConsoleAssets | undefined }) {
  const { sessions, authority, assets } = options;
  const notBuilt = (): never => {
    throw new NotFoundError("console-not-built", "this node has no console: its files were not built (`npm run build`)");
  };

  return async function consolePlugin(app: App): Promise<void> {
    const publicRoute = { config: { public: true }, schema: { hide: true } } as const;

    app.get("/", publicRoute, async (_request, reply) => reply.redirect("/ui/", 302));
    app.get("/ui", publicRoute, async (_request, reply) => reply.redirect("/ui/", 302));

    app.get<{ Params: { file: string } }>("/ui/assets/:file", publicRoute, async (request, reply) => {
      if (assets === undefined) return notBuilt();
      const file = assets.files.get(request.params.file);
      if (file === undefined) throw new NotFoundError("console-asset-not-found", `the console has no file ${request.params.file}`);
      return sendAsset(request, reply, file, IMMUTABLE);
    });

    // Every other path under /ui/ is a page of the console: the same document, which routes by its URL.
    app.get("/ui/*", publicRoute, async (request, reply) => {
      if (assets === undefined) return notBuilt();
      const first = firstRequestOf(request.url);
      return sendAsset(request, reply, first === undefined ? assets.index : withPreload(assets.index, first), "no-store");
    });

    app.post(
      "/ui/session",
      { config: { public: true, bodyCodes: "session" }, schema: { hide: true, body: SessionBody, response: { 201: SessionView, "4xx": ProblemResponse } } },
      async (request, reply) => {
        checkOrigin(request.headers);
        const body = request.body;
        const caller = "login" in body ? sessions.redeemLogin(body.login) : authority.authenticate(`Bearer ${body.token}`);
        const { id, session } = sessions.open(caller);
        request.log.info({ name: caller.name, role: caller.role }, "console session opened");
        return reply.code(201).header("cache-control", "no-store").header("set-cookie", sessionCookie(id, SESSION_MS / 1000)).send(viewOf(session));
      },
    );

    app.get("/ui/session", { config: { public: true }, schema: { hide: true, response: { 200: SessionView, "4xx": ProblemResponse } } }, async (request, reply) => {
      const id = cookieValue(request.headers.cookie, SESSION_COOKIE);
      const session = id === undefined ? undefined : sessions.find(id);
      if (session === undefined) throw new AuthError("unauthorized", "no console session: open the link `warden console` prints, or paste a token");
      return reply.header("cache-control", "no-store").send(viewOf(session));
    });

    app.delete("/ui/session", publicRoute, async (request, reply) => {
      const id = cookieValue(request.headers.cookie, SESSION_COOKIE);
      const session = id === undefined ? undefined : sessions.find(id);
      if (id !== undefined && session !== undefined) {
        checkOrigin(request.headers);
        checkCsrf(session, request.headers["x-warden-csrf"]);
        sessions.close(id);
      }
      return reply.code(204).header("set-cookie", sessionCookie("", 0)).send(null);
    });

    app.post(
      "/v1/console/logins",
      { schema: { operationId: "consoleLogin", summary: "A one-time console login link for the caller's own role (what `warden console` opens)", response: { 201: LoginLink, "4xx": ProblemResponse } } },
      async (request, reply) => {
        const login = sessions.createLogin(callerOf(request));
        // The secret travels in the fragment: browsers never send it, so no access log ever sees it.
        return reply
          .code(201)
          .header("cache-control", "no-store")
          .send({ path: `/ui/login#${login.secret}`, expires_at: new Date(login.expiresAt).toISOString() });
      },
    );
  };
}
