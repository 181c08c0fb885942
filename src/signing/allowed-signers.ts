/**
 * OpenSSH's allowed_signers file (ssh-keygen(1) "ALLOWED SIGNERS", the format git's
 * gpg.ssh.allowedSignersFile uses), parsed from untrusted text. One entry a line:
 *
 *   principals [options] keytype base64-key [comment]
 *
 * `principals` is a comma-separated list of patterns (`*`, `?`, `!` negation), quoted when it
 * holds spaces; options are `cert-authority`, `namespaces="…"`, `valid-after="…"`,
 * `valid-before="…"` (times `YYYYMMDD[HHMM[SS]]`, UTC with a trailing `Z` or `UTC`, else local
 * time). Blank lines and `#` comments are skipped. Any other option, an unknown key type, or a
 * malformed key refuses the whole file: a policy file that cannot be read entirely fails closed.
 */
import { allowedSignersInvalid, ALLOWED_SIGNERS_MAX_BYTES } from "./signing-errors.js";
import { parsePublicKey, SshKeyError, type PlainKey } from "./ssh-key.js";

export interface AllowedSigner {
  /** 1-based line number */
  readonly line: number;
  /** the principals field as written (a pattern list) */
  readonly principals: string;
  readonly certAuthority: boolean;
  /** a pattern list of namespaces the key may sign in; undefined: any */
  readonly namespaces?: string;
  /** seconds since the epoch */
  readonly validAfter?: number;
  readonly validBefore?: number;
  readonly key: PlainKey;
}

export interface AllowedSigners {
  readonly entries: readonly AllowedSigner[];
  /** entries by key fingerprint (a CA line under its CA key's) */
  readonly byFingerprint: ReadonlyMap<string, readonly AllowedSigner[]>;
}

/** Parses the file's text; `path` names it in errors (code `allowed-signers-invalid`). */
export function parseAllowedSigners(text: string, path: string): AllowedSigners {
  if (text.length > ALLOWED_SIGNERS_MAX_BYTES) throw allowedSignersInvalid(path, 0, `the file is larger than ${ALLOWED_SIGNERS_MAX_BYTES} bytes`);
  const entries: AllowedSigner[] = [];
  const byFingerprint = new Map<string, AllowedSigner[]>();
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const entry = parseLine(lines[i]!.replace(/\r$/, ""), i + 1, path);
    if (entry === undefined) continue;
    entries.push(entry);
    const list = byFingerprint.get(entry.key.fingerprint);
    if (list === undefined) byFingerprint.set(entry.key.fingerprint, [entry]);
    else list.push(entry);
  }
  return { entries, byFingerprint };
}

function parseLine(raw: string, line: number, path: string): AllowedSigner | undefined {
  const fail = (reason: string): never => {
    throw allowedSignersInvalid(path, line, reason);
  };
  const cursor = { text: raw, at: 0 };
  skipSpace(cursor);
  if (cursor.at === raw.length || raw[cursor.at] === "#") return undefined;
  const principals = token(cursor, fail);
  if (principals === "") fail("no principals");
  skipSpace(cursor);
  if (cursor.at === raw.length) fail("no key");
  // A key starts with its type; anything else before it is the options field.
  let options = "";
  const save = cursor.at;
  const first = token(cursor, fail);
  if (!looksLikeKeyType(first)) options = first;
  else cursor.at = save;
  skipSpace(cursor);
  const keyType = token(cursor, fail);
  skipSpace(cursor);
  const keyText = token(cursor, fail);
  if (keyType === "" || keyText === "") fail("no key");
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(keyText) || keyText.length % 4 !== 0) fail("the key is not base64");
  let key: PlainKey;
  try {
    const parsed = parsePublicKey(Buffer.from(keyText, "base64"));
    if (parsed.cert !== undefined) fail("a certificate cannot be listed; list its CA key with cert-authority");
    if (parsed.type !== keyType) fail(`the key is a ${parsed.type} key, the line says ${keyType}`);
    key = parsed.key;
  } catch (error) {
    if (error instanceof SshKeyError) fail(error.message);
    throw error;
  }
  const opts = parseOptions(options, fail);
  if (opts.validAfter !== undefined && opts.validBefore !== undefined && opts.validBefore < opts.validAfter) fail('"valid-before" time is before "valid-after"');
  return { line, principals, key: key!, ...opts };
}

function looksLikeKeyType(word: string): boolean {
  return /^(ssh-|ecdsa-|sk-)/.test(word);
}

interface Cursor {
  readonly text: string;
  at: number;
}

function skipSpace(c: Cursor): void {
  while (c.at < c.text.length && (c.text[c.at] === " " || c.text[c.at] === "\t")) c.at++;
}

/** A whitespace-delimited token; double quotes (which it keeps out) may hold spaces. */
function token(c: Cursor, fail: (reason: string) => never): string {
  let out = "";
  let quoted = false;
  for (; c.at < c.text.length; c.at++) {
    const ch = c.text[c.at]!;
    if (ch === '"') {
      quoted = !quoted;
      out += ch;
      continue;
    }
    if (!quoted && (ch === " " || ch === "\t")) break;
    out += ch;
  }
  if (quoted) fail("unbalanced quote");
  // A principals field in quotes as a whole is the text inside them.
  return out.length >= 2 && out.startsWith('"') && out.endsWith('"') && !out.slice(1, -1).includes('"') ? out.slice(1, -1) : out;
}

function parseOptions(
  field: string,
  fail: (reason: string) => never,
): { certAuthority: boolean; namespaces?: string; validAfter?: number; validBefore?: number } {
  const out: { certAuthority: boolean; namespaces?: string; validAfter?: number; validBefore?: number } = { certAuthority: false };
  if (field === "") return out;
  let at = 0;
  const seen = new Set<string>();
  while (at < field.length) {
    const eq = /^[A-Za-z-]+/.exec(field.slice(at));
    if (eq === null) fail(`bad option at ${JSON.stringify(field.slice(at))}`);
    const name = eq![0].toLowerCase();
    at += eq![0].length;
    let value: string | undefined;
    if (field[at] === "=") {
      if (field[at + 1] !== '"') fail(`option ${name}: missing start quote`);
      const close = field.indexOf('"', at + 2);
      if (close < 0) fail(`option ${name}: missing end quote`);
      value = field.slice(at + 2, close);
      at = close + 1;
    }
    if (seen.has(name)) fail(`multiple "${name}" clauses`);
    seen.add(name);
    if (name === "cert-authority" && value === undefined) out.certAuthority = true;
    else if (name === "namespaces" && value !== undefined) out.namespaces = value;
    else if (name === "valid-after" && value !== undefined) out.validAfter = parseTime(value, fail);
    else if (name === "valid-before" && value !== undefined) out.validBefore = parseTime(value, fail);
    else fail(`unsupported option ${JSON.stringify(name)}`);
    if (at === field.length) break;
    if (field[at] !== ",") fail("options must be separated by commas");
    at++;
    if (at === field.length) fail("trailing comma in options");
  }
  return out;
}

/** `YYYYMMDD`, `YYYYMMDDHHMM` or `YYYYMMDDHHMMSS`, UTC when it ends in `Z` or `UTC`, else local time. */
export function parseTime(text: string, fail: (reason: string) => never): number {
  let s = text;
  let utc = false;
  if (/z$/i.test(s)) {
    utc = true;
    s = s.slice(0, -1);
  } else if (/utc$/i.test(s)) {
    utc = true;
    s = s.slice(0, -3);
  }
  if (!/^\d+$/.test(s) || (s.length !== 8 && s.length !== 12 && s.length !== 14)) fail(`invalid time ${JSON.stringify(text)}`);
  const n = (from: number, len: number): number => (from + len <= s.length ? Number(s.slice(from, from + len)) : 0);
  const [y, mo, d, h, mi, se] = [n(0, 4), n(4, 2), n(6, 2), n(8, 2), n(10, 2), n(12, 2)];
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) fail(`invalid time ${JSON.stringify(text)}`);
  const ms = utc ? Date.UTC(y, mo - 1, d, h, mi, se) : new Date(y, mo - 1, d, h, mi, se).getTime();
  return Math.floor(ms / 1000);
}

/** OpenSSH's match_pattern: `*` any run, `?` any one character; whole string. */
export function matchPattern(text: string, pattern: string): boolean {
  let t = 0;
  let p = 0;
  let starP = -1;
  let starT = 0;
  while (t < text.length) {
    if (p < pattern.length && (pattern[p] === "?" || pattern[p] === text[t])) {
      t++;
      p++;
    } else if (p < pattern.length && pattern[p] === "*") {
      starP = p++;
      starT = t;
    } else if (starP >= 0) {
      p = starP + 1;
      t = ++starT;
    } else return false;
  }
  while (p < pattern.length && pattern[p] === "*") p++;
  return p === pattern.length;
}

/** OpenSSH's match_pattern_list: true when some pattern matches and no `!`-negated one does. */
export function matchPatternList(text: string, list: string): boolean {
  let matched = false;
  for (const item of list.split(",")) {
    if (item.startsWith("!")) {
      if (matchPattern(text, item.slice(1))) return false;
    } else if (matchPattern(text, item)) matched = true;
  }
  return matched;
}
