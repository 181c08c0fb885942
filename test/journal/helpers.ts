/** Shared builders for journal tests: temp dirs and hand-assembled journals (bypassing the writer's rules). */
import { randomUUID } from "node:crypto";
import { canonicalJson } from "../../src/core/canonical.js";
import { encodeLine, lineHash, lineText, signingMessage } from "../../src/journal/line.js";
import { ZERO_HASH, type JournalEntry, type JournalEvent, type PublicKeyRecord, type SigningKey } from "../../src/journal/types.js";

export function recordOf(key: SigningKey): PublicKeyRecord {
  return { key_id: key.key_id, public_key: key.public_key };
}

export const REQUEST_HASH = `sha256:${"ab".repeat(32)}` as const;

export function started(extra: Partial<Record<"provider", string>> = {}): JournalEvent {
  return { type: "run.started", invocation: { scope: "api:test", id: "inv-1", request_hash: REQUEST_HASH }, agent: "claude", ...extra };
}

/** A small clean run with one effect of each outcome shape used by the tamper tests. */
export function cleanRunEvents(): JournalEvent[] {
  return [
    started({ provider: "claude" }),
    { type: "effect.started", effect_id: "e1", kind: "tool", name: "bash", fingerprint: "sha256:1" },
    { type: "note", text: "output ✓", tokens: 12 },
    { type: "effect.finished", effect_id: "e1", outcome: "succeeded" },
    { type: "run.terminated", reason: "completed", result_hash: `sha256:${"cd".repeat(32)}` },
  ];
}

export interface LineOverrides {
  seq?: number;
  prev?: string;
  run_id?: string;
  key_id?: string;
}

/**
 * Signs `events` into journal lines with correct seq/prev chaining, but without the writer's order
 * rules, so tests can build journals that break them. `override(i)` alters entry i before signing.
 */
export function buildLines(
  events: readonly JournalEvent[],
  key: SigningKey,
  options: { runId?: string; override?: (index: number) => LineOverrides | undefined; start?: Date } = {},
): Buffer[] {
  const runId = options.runId ?? randomUUID();
  const base = (options.start ?? new Date("2026-01-02T03:04:05.678Z")).getTime();
  const lines: Buffer[] = [];
  let prev = ZERO_HASH;
  events.forEach((event, i) => {
    const entry: JournalEntry = {
      v: 1,
      run_id: runId,
      seq: i,
      prev,
      ts: new Date(base + i).toISOString(),
      key_id: key.key_id,
      event,
      ...(options.override?.(i) ?? {}),
    };
    const line = encodeLine(entry, key);
    lines.push(line);
    prev = lineHash(line);
  });
  return lines;
}

export function buildJournal(events: readonly JournalEvent[], key: SigningKey, options: Parameters<typeof buildLines>[2] = {}): Buffer {
  return Buffer.concat(buildLines(events, key, options));
}

export function entryOf(line: Buffer): JournalEntry {
  return (JSON.parse(line.toString("utf8")) as { entry: JournalEntry }).entry;
}

/**
 * Signs any JSON object as an entry, skipping every check encodeLine makes (schema, key match):
 * the way a buggy or hostile implementation would.
 */
export function signRaw(entry: unknown, key: SigningKey): Buffer {
  const canonical = canonicalJson(entry);
  const sig = Buffer.from(key.sign(signingMessage(canonical))).toString("base64");
  return Buffer.from(lineText(canonical, sig) + "\n", "utf8");
}

/** The 1-based line holding byte `offset` (a newline belongs to the line it ends). */
export function lineNumberAt(lines: readonly Buffer[], offset: number): number {
  let end = 0;
  for (let i = 0; i < lines.length; i++) {
    end += lines[i]!.byteLength;
    if (offset < end) return i + 1;
  }
  throw new RangeError(`offset ${offset} past the journal`);
}
