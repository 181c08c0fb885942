/**
 * Where the node's bearer tokens come from (G12): `WARDEN_TOKEN` (operator) and
 * `WARDEN_OBSERVER_TOKEN` (observer) in the environment, `<home>/tokens.json` (name, role and the
 * sha256 of each token — never the token), and `<home>/token`, the operator token generated on
 * first start when nothing else is configured. Only sha256 hashes are kept in memory.
 */
import { createHash, randomBytes } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import { StorageError, errnoCode } from "../core/errors.js";
import { publishNewFileSync, readPrivateFileSync } from "../storage/secure-fs.js";
import { parseConfigText } from "./check.js";
import { TokensFile } from "./schema.js";

export type Role = "operator" | "observer";

export interface TokenRecord {
  readonly name: string;
  readonly role: Role;
  /** sha256 of the token, 32 bytes */
  readonly hash: Buffer;
}

export interface TokenSources {
  readonly home: string;
  readonly operatorToken?: string;
  readonly observerToken?: string;
  readonly operatorName?: string;
  readonly observerName?: string;
}

export interface LoadedTokens {
  readonly tokens: readonly TokenRecord[];
  /** set when this start generated `<home>/token` */
  readonly generated?: string;
}

export const TOKEN_FILE = "token";
export const TOKENS_FILE = "tokens.json";
const MAX_TOKEN_FILE_BYTES = 4096;
const MAX_TOKENS_FILE_BYTES = 1024 * 1024;

export function hashToken(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

export function loadTokens(sources: TokenSources): LoadedTokens {
  const operatorName = sources.operatorName ?? "operator";
  const tokens: TokenRecord[] = [];
  if (nonEmpty(sources.operatorToken)) tokens.push({ name: operatorName, role: "operator", hash: hashToken(sources.operatorToken) });
  if (nonEmpty(sources.observerToken)) {
    tokens.push({ name: sources.observerName ?? "observer", role: "observer", hash: hashToken(sources.observerToken) });
  }
  tokens.push(...readTokensFile(join(sources.home, TOKENS_FILE)));
  const tokenPath = join(sources.home, TOKEN_FILE);
  const local = readTokenFile(tokenPath);
  if (local !== undefined) tokens.push({ name: operatorName, role: "operator", hash: hashToken(local) });
  if (tokens.length > 0) return { tokens };
  const generated = generateTokenFile(tokenPath);
  return { tokens: [{ name: operatorName, role: "operator", hash: hashToken(generated) }], generated: tokenPath };
}

function nonEmpty(value: string | undefined): value is string {
  return value !== undefined && value.length > 0;
}

function readTokensFile(path: string): TokenRecord[] {
  let text: string;
  try {
    text = readPrivateFileSync(path, MAX_TOKENS_FILE_BYTES).toString("utf8");
  } catch (error) {
    if (errnoCode(error) === "ENOENT") return [];
    throw error;
  }
  const file = parseConfigText(TokensFile, text, "config-tokens-invalid", path);
  return file.tokens.map((t) => ({
    name: t.name,
    role: t.role,
    hash: Buffer.from(t.sha256.replace(/^sha256:/, ""), "hex"),
  }));
}

function readTokenFile(path: string): string | undefined {
  try {
    const token = readPrivateFileSync(path, MAX_TOKEN_FILE_BYTES).toString("utf8").trim();
    return token.length > 0 ? token : undefined;
  } catch (error) {
    if (errnoCode(error) === "ENOENT") return undefined;
    throw error;
  }
}

/**
 * Creates `<home>/token` (0600, fsynced); a concurrent creator's token wins. The file gets its
 * name only once it holds the token (a temp file, then link), so a full disk or a crash never
 * leaves an empty one. An empty one found (left by an older version's interrupted first start)
 * authenticates nobody and would refuse every later start: it is replaced.
 */
function generateTokenFile(path: string): string {
  for (let attempt = 0; attempt < 2; attempt++) {
    const token = randomBytes(32).toString("base64url");
    if (publishNewFileSync(path, `${token}\n`)) return token;
    const existing = readTokenFile(path);
    if (existing !== undefined) return existing;
    fs.rmSync(path, { force: true });
  }
  throw new StorageError("token-file-unusable", `${path} stays empty; remove it, or configure WARDEN_TOKEN`);
}
