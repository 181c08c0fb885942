/**
 * The browser's own check of a run's journal (DESIGN.md "Journal"), independent of the node's
 * verifier: it re-serializes each entry with an RFC 8785 implementation (`canonicalize`), follows
 * the sha256 chain and checks each Ed25519 signature with WebCrypto against the node's published
 * keys. It names the first line that fails, 1-based, as `warden journal verify` does.
 */
import canonicalizeImpl from "canonicalize";

const canonicalize = canonicalizeImpl as unknown as (input: unknown) => string | undefined;
const DOMAIN = "warden-journal-v1\n";
const ZERO = "0".repeat(64);

export interface JournalCheck {
  readonly ok: boolean;
  /** lines that verified */
  readonly entries: number;
  readonly failure?: { readonly line: number; readonly reason: string };
  /** the last line has no newline: a run cut while writing (not a verification failure) */
  readonly incompleteTail: boolean;
  readonly keyIds: readonly string[];
}

export interface PublicKeyView {
  readonly key_id: string;
  readonly public_key: string;
}

function base64Bytes(text: string): Uint8Array | undefined {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) return undefined;
  const raw = atob(text);
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}

export function hex(bytes: ArrayBuffer): string {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The keys whose published id is the one their bytes give (first 8 bytes of sha256, hex). */
async function importKeys(keys: readonly PublicKeyView[]): Promise<Map<string, CryptoKey>> {
  const out = new Map<string, CryptoKey>();
  for (const key of keys) {
    const raw = base64Bytes(key.public_key);
    if (raw === undefined || raw.byteLength !== 32) continue;
    const id = hex(await crypto.subtle.digest("SHA-256", raw)).slice(0, 16);
    if (id !== key.key_id) continue;
    out.set(id, await crypto.subtle.importKey("raw", raw, { name: "Ed25519" }, false, ["verify"]));
  }
  return out;
}

interface Entry {
  v?: unknown;
  run_id?: unknown;
  seq?: unknown;
  prev?: unknown;
  key_id?: unknown;
  event?: { type?: unknown };
}

export async function verifyJournal(bytes: Uint8Array, keys: readonly PublicKeyView[]): Promise<JournalCheck> {
  const trusted = await importKeys(keys);
  const keyIds = [...trusted.keys()];
  const decoder = new TextDecoder("utf-8", { fatal: true });
  const encoder = new TextEncoder();
  let prev = ZERO;
  let runId: unknown;
  let terminated = false;
  let start = 0;
  let line = 0;
  const fail = (reason: string): JournalCheck => ({ ok: false, entries: line - 1, failure: { line, reason }, incompleteTail: false, keyIds });
  while (start < bytes.byteLength) {
    const end = bytes.indexOf(0x0a, start);
    if (end < 0) return { ok: true, entries: line, incompleteTail: true, keyIds };
    line++;
    const lineBytes = bytes.subarray(start, end + 1);
    start = end + 1;
    let text: string;
    let parsed: { entry?: Entry; sig?: unknown };
    try {
      text = decoder.decode(lineBytes.subarray(0, -1));
      parsed = JSON.parse(text) as { entry?: Entry; sig?: unknown };
    } catch {
      return fail("not a JSON line");
    }
    const entry = parsed.entry;
    if (typeof entry !== "object" || entry === null || typeof parsed.sig !== "string") return fail("not an {entry, sig} line");
    const canonical = canonicalize(entry);
    if (canonical === undefined || text !== `{"entry":${canonical},"sig":"${parsed.sig}"}`) return fail("not in canonical form (RFC 8785)");
    if (entry.v !== 1) return fail("unknown entry version");
    if (entry.seq !== line - 1) return fail(`seq ${String(entry.seq)} where ${line - 1} belongs`);
    if (line === 1) runId = entry.run_id;
    else if (entry.run_id !== runId) return fail("names another run");
    if (entry.prev !== prev) return fail("prev does not match the previous line's hash (an edit, deletion or reordering)");
    if (terminated) return fail("an entry after run.terminated");
    if (line === 1 && entry.event?.type !== "run.started") return fail("the first entry is not run.started");
    const key = typeof entry.key_id === "string" ? trusted.get(entry.key_id) : undefined;
    if (key === undefined) return fail(`signed by key ${String(entry.key_id)}, which is not one of the node's published keys`);
    const signature = base64Bytes(parsed.sig);
    if (signature === undefined || signature.byteLength !== 64) return fail("the signature is not 64 bytes of base64");
    if (!(await crypto.subtle.verify({ name: "Ed25519" }, key, signature, encoder.encode(DOMAIN + canonical)))) return fail("the signature does not verify");
    terminated = entry.event?.type === "run.terminated";
    prev = hex(await crypto.subtle.digest("SHA-256", lineBytes));
  }
  return { ok: true, entries: line, incompleteTail: false, keyIds };
}
