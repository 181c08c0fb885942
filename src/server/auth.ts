/**
 * Bearer-token authentication (G12). Tokens are known only by their sha256; a presented token is
 * hashed and compared against every known hash with crypto.timingSafeEqual (fixed 32-byte
 * inputs, no early exit), so timing reveals neither which token nor how much of it matched.
 * Observers may only read (GET/HEAD).
 */
import { timingSafeEqual } from "node:crypto";
import { AuthError } from "../core/errors.js";
import { hashToken, type Role, type TokenRecord } from "../config/tokens.js";

export interface Caller {
  readonly name: string;
  readonly role: Role;
}

const BEARER_RE = /^Bearer[ ]+([\x21-\x7e]{1,4096})[ ]*$/i;
const READ_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD"]);

export class TokenAuthority {
  readonly #tokens: readonly TokenRecord[];

  constructor(tokens: readonly TokenRecord[]) {
    for (const t of tokens) {
      if (t.hash.byteLength !== 32) throw new TypeError(`token ${t.name}: hash must be 32 bytes`);
    }
    this.#tokens = tokens;
  }

  /** The caller a request's Authorization header names; AuthError `unauthorized` otherwise. */
  authenticate(header: string | undefined): Caller {
    const match = header === undefined ? null : BEARER_RE.exec(header);
    // The only place that knows no token came: it says where the CLI takes one from, which a
    // client talking to another URL (through an authenticating proxy) cannot know beforehand.
    if (match === null) {
      throw new AuthError(
        "unauthorized",
        "a bearer token is required (Authorization: Bearer <token>); the warden CLI sends $WARDEN_TOKEN, or the local node's <home>/token when it talks to that node",
      );
    }
    const presented = hashToken(match[1] as string);
    let found: TokenRecord | undefined;
    for (const token of this.#tokens) {
      if (timingSafeEqual(token.hash, presented) && found === undefined) found = token;
    }
    if (found === undefined) throw new AuthError("unauthorized", "the bearer token is not valid");
    return { name: found.name, role: found.role };
  }

  /** Observers read; only operators change anything. */
  authorize(caller: Caller, method: string): void {
    if (caller.role === "operator" || READ_METHODS.has(method)) return;
    throw new AuthError("forbidden", `${caller.name} is an observer: only GET requests are allowed`);
  }
}

/** Who holds a session or a stream, for the bounds one principal may not pass: a token's name and role. */
export function principalOf(caller: Caller): string {
  return `${caller.role}:${caller.name}`;
}
