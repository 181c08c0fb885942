/**
 * Journal throughput against same-run baselines:
 * (a) durable appends/s of one writer (small note events, each fdatasynced before append resolves)
 *     vs raw append+fdatasync/s on the same disk — target >= 0.8x;
 * (b) verified entries/s of a 20,000-entry journal vs raw Ed25519 verifications/s of messages of
 *     the same size on this core — target >= 0.7x.
 */
import { randomUUID, verify } from "node:crypto";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { resolveLimits } from "../src/core/limits.js";
import { EmbeddedJournalStore } from "../src/backends/embedded/journal/journal-store.js";
import { generateSigningKey, publicKeyObject } from "../src/journal/keys.js";
import { encodeLine, lineHash, signingMessage } from "../src/journal/line.js";
import { JournalWriter } from "../src/journal/writer.js";
import { verifyJournal } from "../src/journal/verify.js";
import { ZERO_HASH, type JournalEntry, type JournalEvent, type SigningKey } from "../src/journal/types.js";
import { benchDir, fmt, median, rawFdatasyncPerSec, ratioLine } from "./baseline.js";

const STARTED: JournalEvent = {
  type: "run.started",
  invocation: { scope: "api:bench", id: "bench", request_hash: `sha256:${"0".repeat(64)}` },
  agent: "claude",
};

function note(i: number): JournalEvent {
  return { type: "note", i, output: `sha256:${i.toString(16).padStart(64, "0")}` };
}

async function appendsPerSec(store: EmbeddedJournalStore, key: SigningKey, seconds: number, inFlight: number): Promise<number> {
  const limits = resolveLimits({ journalBytes: 1 << 30 });
  const writer = await JournalWriter.create({ store, key, runId: randomUUID(), limits });
  await writer.append(STARTED);
  let n = 0;
  const end = performance.now() + seconds * 1000;
  const start = performance.now();
  while (performance.now() < end) {
    if (inFlight === 1) {
      await writer.append(note(n++));
    } else {
      const batch: Promise<unknown>[] = [];
      for (let k = 0; k < inFlight; k++) batch.push(writer.append(note(n++)));
      await Promise.all(batch);
    }
  }
  const elapsed = (performance.now() - start) / 1000;
  await writer.close();
  return n / elapsed;
}

function buildJournal(key: SigningKey, entries: number): { bytes: Buffer; sampleMessage: Buffer; sampleSig: Buffer } {
  const runId = randomUUID();
  const lines: Buffer[] = [];
  let prev = ZERO_HASH;
  const base = Date.UTC(2026, 0, 1);
  let sample: { message: Buffer; sig: Buffer } | undefined;
  for (let seq = 0; seq < entries; seq++) {
    const entry: JournalEntry = {
      v: 1,
      run_id: runId,
      seq,
      prev,
      ts: new Date(base + seq).toISOString(),
      key_id: key.key_id,
      event: seq === 0 ? STARTED : note(seq),
    };
    const line = encodeLine(entry, key);
    if (seq === Math.floor(entries / 2)) {
      const parsed = JSON.parse(line.toString("utf8")) as { sig: string };
      const text = line.toString("utf8");
      const canonical = text.slice('{"entry":'.length, text.indexOf(',"sig":"'));
      sample = { message: signingMessage(canonical), sig: Buffer.from(parsed.sig, "base64") };
    }
    lines.push(line);
    prev = lineHash(line);
  }
  return { bytes: Buffer.concat(lines), sampleMessage: sample!.message, sampleSig: sample!.sig };
}

function rawVerifiesPerSec(publicKey: string, message: Buffer, sig: Buffer, seconds: number): number {
  const key = publicKeyObject(publicKey);
  let n = 0;
  const end = performance.now() + seconds * 1000;
  const start = performance.now();
  while (performance.now() < end) {
    for (let k = 0; k < 50; k++) if (!verify(null, message, key, sig)) throw new Error("baseline signature failed");
    n += 50;
  }
  return n / ((performance.now() - start) / 1000);
}

/** Rounds alternate measurement and baseline, so load spikes hit both; the median round's ratio is reported. */
const ROUNDS = 3;

export default async function (): Promise<void> {
  const { key } = generateSigningKey();
  const dir = benchDir("journal");
  try {
    const store = new EmbeddedJournalStore(join(dir, "journals"));
    const raw: number[] = [];
    const sequential: number[] = [];
    const pipelined: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      raw.push(rawFdatasyncPerSec(1.5));
      sequential.push(await appendsPerSec(store, key, 1.5, 1));
      pipelined.push(await appendsPerSec(store, key, 1, 8));
    }
    const rawMedian = median(raw);
    console.log(
      ratioLine("journal append+fdatasync, one writer, each append awaited", median(sequential), rawMedian, "appends/s", 0.8) +
        `  [per-round ratios ${sequential.map((v, i) => (v / raw[i]!).toFixed(2)).join(", ")}]`,
    );
    console.log(
      ratioLine("journal append+fdatasync, one writer, 8 appends in flight (group commit)", median(pipelined), rawMedian, "appends/s") +
        `  [per-round ratios ${pipelined.map((v, i) => (v / raw[i]!).toFixed(2)).join(", ")}]`,
    );

    const entries = 20_000;
    const { bytes, sampleMessage, sampleSig } = buildJournal(key, entries);
    const trusted = [{ key_id: key.key_id, public_key: key.public_key }];
    const baseline: number[] = [];
    const verified: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      baseline.push(rawVerifiesPerSec(key.public_key, sampleMessage, sampleSig, 1.5));
      const start = performance.now();
      const report = verifyJournal(bytes, trusted);
      verified.push(entries / ((performance.now() - start) / 1000));
      if (!report.ok || report.entries !== entries) throw new Error(`bench journal did not verify: ${report.first_error?.reason}`);
    }
    console.log(
      ratioLine(
        `journal verify (${fmt(entries)} entries, ${fmt(bytes.byteLength / 1024 / 1024, 1)} MiB)`,
        median(verified),
        median(baseline),
        "entries/s",
        0.7,
      ) + `  [baseline: crypto.verify of ${sampleMessage.byteLength}-byte messages; per-round ratios ${verified.map((v, i) => (v / baseline[i]!).toFixed(2)).join(", ")}]`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
