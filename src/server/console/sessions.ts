/**
 * Browser sessions of the operator console (DESIGN.md "Operator console"). A session is bound to
 * the caller (name and role) whose token or login link opened it, lives SESSION_MS at most and is
 * kept only in this process's memory: a restart ends every session. Login links are single-use
 * and expire after LOGIN_MS. Secrets are known only by their sha256, so a lookup's timing says
 * nothing about a secret; the CSRF token is compared in constant time.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { LimitError, WardenError } from "../../core/errors.js";
import { principalOf, type Caller } from "../auth.js";

export const SESSION_MS = 60 * 60 * 1000;
export const LOGIN_MS = 2 * 60 * 1000;
/**
 * Bounds (G11): a flood of logins forgets the oldest sessions, never grows memory. A principal
 * (a token's name and role) holds at most MAX_SESSIONS_PER_PRINCIPAL: its own flood forgets its
 * own oldest sessions, never another's (an observer opening sessions in a loop once logged every
 * operator out). When the node as a whole is full, the principal holding the most gives one up.
 */
const MAX_SESSIONS = 1024;
export const MAX_SESSIONS_PER_PRINCIPAL = 64;
const MAX_LOGINS = 64;


export interface ConsoleSession {
  readonly caller: Caller;
  readonly csrf: string;
  readonly expiresAt: number;
}

function secret(): string {
  return randomBytes(32).toString("base64url");
}

function keyOf(value: string): string {
  return createHash("sha256").update(value, "utf8").digest("hex");
}

export class ConsoleSessions {
  readonly #sessions = new Map<string, ConsoleSession>();
  readonly #logins = new Map<string, { readonly caller: Caller; readonly expiresAt: number }>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** A one-time login secret for `caller`'s own role. */
  createLogin(caller: Caller): { secret: string; expiresAt: number } {
    this.#sweep();
    if (this.#logins.size >= MAX_LOGINS) {
      throw new LimitError("console-logins-exhausted", `${MAX_LOGINS} login links are waiting to be used; use one or wait ${LOGIN_MS / 1000} s`, { status: 429 });
    }
    const value = secret();
    const expiresAt = this.#now() + LOGIN_MS;
    this.#logins.set(keyOf(value), { caller, expiresAt });
    return { secret: value, expiresAt };
  }

  /** The caller a login secret was made for; it is spent by this call, whatever the answer. */
  redeemLogin(value: string): Caller {
    const key = keyOf(value);
    const login = this.#logins.get(key);
    this.#logins.delete(key);
    if (login === undefined || login.expiresAt <= this.#now()) {
      throw new WardenError("login-link-invalid", "this login link is unknown, used or expired; run `warden console` for a new one", 401);
    }
    return login.caller;
  }

  open(caller: Caller): { id: string; session: ConsoleSession } {
    this.#sweep();
    const own = this.#keysOf(principalOf(caller));
    while (own.length >= MAX_SESSIONS_PER_PRINCIPAL) this.#sessions.delete(own.shift()!);
    while (this.#sessions.size >= MAX_SESSIONS) {
      const largest = this.#largestPrincipal();
      this.#sessions.delete(this.#keysOf(largest)[0]!);
    }
    const id = secret();
    const session = { caller, csrf: secret(), expiresAt: this.#now() + SESSION_MS };
    this.#sessions.set(keyOf(id), session);
    return { id, session };
  }

  /** The live session of a cookie value, or undefined. */
  find(id: string): ConsoleSession | undefined {
    const key = keyOf(id);
    const session = this.#sessions.get(key);
    if (session === undefined) return undefined;
    if (session.expiresAt <= this.#now()) {
      this.#sessions.delete(key);
      return undefined;
    }
    return session;
  }

  close(id: string): void {
    this.#sessions.delete(keyOf(id));
  }

  /** The keys of a principal's sessions, oldest first (the map keeps insertion order). */
  #keysOf(principal: string): string[] {
    const keys: string[] = [];
    for (const [key, session] of this.#sessions) if (principalOf(session.caller) === principal) keys.push(key);
    return keys;
  }

  #largestPrincipal(): string {
    const counts = new Map<string, number>();
    for (const session of this.#sessions.values()) counts.set(principalOf(session.caller), (counts.get(principalOf(session.caller)) ?? 0) + 1);
    return [...counts].reduce((a, b) => (b[1] > a[1] ? b : a))[0];
  }

  #sweep(): void {
    const now = this.#now();
    for (const [key, login] of this.#logins) if (login.expiresAt <= now) this.#logins.delete(key);
    for (const [key, session] of this.#sessions) if (session.expiresAt <= now) this.#sessions.delete(key);
  }
}

/** Refuses a changing request whose CSRF header is not the session's token. */
export function checkCsrf(session: ConsoleSession, header: string | string[] | undefined): void {
  const presented = typeof header === "string" ? Buffer.from(header, "utf8") : undefined;
  const expected = Buffer.from(session.csrf, "utf8");
  if (presented === undefined || presented.byteLength !== expected.byteLength || !timingSafeEqual(presented, expected)) {
    throw new WardenError("csrf-token-invalid", "a console request that changes something must carry the session's X-Warden-CSRF header", 403);
  }
}

/** The value of cookie `name` in a Cookie header, or undefined. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

