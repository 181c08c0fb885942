/**
 * The node's transparency log (DESIGN.md "Transparency"): statements appended in batches (one
 * store transaction per batch, O(log n) node reads each), a checkpoint signed by the node's key at
 * most every `checkpointIntervalMs` while leaves arrive and at close, each new checkpoint submitted
 * to the configured witnesses in the background, and the reads the API serves: checkpoint, tiles,
 * entry bundles, inclusion and consistency proofs.
 */
import type { SigningKey } from "../journal/types.js";
import { NotFoundError, ValidationError } from "../core/errors.js";
import { formatCheckpoint } from "./checkpoint.js";
import {
  consistencyProof,
  inclusionProof,
  nodeKey,
  nodesRead,
  treeHash,
  type Hash,
  type NodeReader,
} from "./merkle.js";
import { ed25519NoteSigner, formatVkey, SIG_ED25519, signNote } from "./note.js";
import { leafOf, statementKey, type Statement } from "./statements.js";
import type { LogStore, StoredCheckpoint } from "./store.js";
import { MAX_ENTRY_BYTES, TILE_HEIGHT, TILE_WIDTH, type TileRef } from "./tiles.js";
import { submitCheckpoint, type WitnessConfig } from "./witness-client.js";

export const DEFAULT_CHECKPOINT_INTERVAL_MS = 1000;
/**
 * How far the catch-up watermark stays behind the facts it covers: a fact's statement may reach
 * the log after a later one (records race, fleet nodes' clocks differ), and the watermark must not
 * pass it before it is logged.
 */
export const DEFAULT_WATERMARK_MARGIN_MS = 60_000;
/** First wait before a failed append or a witness that failed is tried again; doubles up to MAX_RETRY_MS. */
export const DEFAULT_RETRY_MS = 1000;
const MAX_RETRY_MS = 60_000;
/** The watermark is written when it rises by at least this much: a lower stored one is only more cautious, and most batches then write none. */
const WATERMARK_STEP_MS = 1000;

/** Points where a test may fail or kill the process (like delivery-faults.ts); production passes nothing. */
export interface LogFaults {
  /** before a batch of statements is stored */
  readonly beforeAppend?: (statements: readonly Statement[]) => void;
}

export interface TransparencyLogOptions {
  readonly store: LogStore;
  /** the checkpoint origin line, also the note key name */
  readonly origin: string;
  /** the node's active signing key */
  readonly key: () => Promise<SigningKey>;
  readonly checkpointIntervalMs?: number;
  readonly witnesses?: readonly WitnessConfig[];
  /** called with a witness failure (down, refusing): the log goes on */
  readonly onWitnessError?: (witness: string, error: unknown) => void;
  /** how far the catch-up watermark stays behind the facts it covers (default DEFAULT_WATERMARK_MARGIN_MS; tests shorten it) */
  readonly watermarkMarginMs?: number;
  /** first wait before a failed append, or a witness behind, is tried again (default DEFAULT_RETRY_MS) */
  readonly retryMs?: number;
  /** test seam: fail or kill the process at a point of the log; production passes nothing */
  readonly faults?: LogFaults;
}

export interface InclusionProof {
  readonly index: number;
  readonly size: number;
  /** standard base64 of each hash, leaf side first */
  readonly proof: readonly string[];
}

export interface RunProof extends InclusionProof {
  /** the leaf's statement, exactly the logged bytes as UTF-8 */
  readonly leaf: string;
  /** the checkpoint of `size`, with the node's signature and every witness cosignature it got */
  readonly checkpoint: string;
}

export interface WitnessStatus {
  readonly name: string;
  /** largest size the witness cosigned (0: none yet) */
  readonly size: number;
  /** leaves of the latest checkpoint it has not cosigned */
  readonly behind: number;
  /**
   * Seconds since the oldest checkpoint it has not cosigned was signed (0 when it has the latest),
   * as this process saw it: a checkpoint signed before the process started counts from its start.
   */
  readonly lag_seconds: number;
  readonly last_error?: string;
}

export interface LogStatus {
  readonly origin: string;
  readonly vkey: string;
  readonly size: number;
  readonly checkpoint_size: number;
  /** statements whose append failed and that are tried again (also at the next start: see Warden's log catch-up) */
  readonly unlogged: number;
  readonly witnesses: readonly WitnessStatus[];
}

interface Pending {
  readonly statement: Statement;
  readonly at: number | undefined;
  resolve(index: number): void;
  reject(error: unknown): void;
}

export class TransparencyLog {
  readonly origin: string;
  readonly #store: LogStore;
  readonly #key: () => Promise<SigningKey>;
  readonly #interval: number;
  readonly #witnesses: readonly WitnessConfig[];
  readonly #onWitnessError: (witness: string, error: unknown) => void;
  #queue: Pending[] = [];
  #flushing: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** checkpoints are made one at a time */
  #checkpointing: Promise<StoredCheckpoint> = Promise.resolve({ size: -1, note: "" });
  #witnessing: Promise<void> = Promise.resolve();
  readonly #witnessErrors = new Map<string, string>();
  readonly #margin: number;
  readonly #retryMs: number;
  readonly #faults: LogFaults | undefined;
  /** statements whose append failed, by key, tried again with backoff; they hold the watermark back */
  readonly #unlogged = new Map<string, { readonly statement: Statement; readonly at: number | undefined }>();
  #appendRetry: { timer: NodeJS.Timeout | undefined; wait: number };
  #witnessRetry: { timer: NodeJS.Timeout | undefined; wait: number };
  /** checkpoint size → when this process signed (or, for the latest at open, first saw) it */
  readonly #signedAt = new Map<number, number>();
  /** what this process knows without a store read, for metrics scraped synchronously */
  #known = { size: 0, checkpointSize: 0, witnessed: new Map<string, number>() as ReadonlyMap<string, number> };
  /** the watermark this process last stored (the store keeps the larger of it and any other) */
  #storedMark = -Infinity;
  #closed = false;

  constructor(options: TransparencyLogOptions) {
    this.origin = options.origin;
    this.#store = options.store;
    this.#key = options.key;
    this.#interval = options.checkpointIntervalMs ?? DEFAULT_CHECKPOINT_INTERVAL_MS;
    this.#witnesses = options.witnesses ?? [];
    this.#onWitnessError = options.onWitnessError ?? (() => undefined);
    this.#margin = options.watermarkMarginMs ?? DEFAULT_WATERMARK_MARGIN_MS;
    this.#retryMs = options.retryMs ?? DEFAULT_RETRY_MS;
    this.#faults = options.faults;
    this.#appendRetry = { timer: undefined, wait: this.#retryMs };
    this.#witnessRetry = { timer: undefined, wait: this.#retryMs };
  }

  /**
   * At open: leaves appended after the last checkpoint (a crash between a leaf and its
   * checkpoint) get one now, so no logged leaf stays unsigned; a new log signs its empty tree.
   */
  async open(): Promise<void> {
    const latest = await this.checkpoint();
    if (this.#witnesses.length > 0 && !this.#signedAt.has(latest.size)) this.#signedAt.set(latest.size, Date.now());
    this.#known = { size: await this.#store.size(), checkpointSize: latest.size, witnessed: await this.#store.witnessed() };
    // Witnesses behind the latest checkpoint (down at our last run, or new) get it now, in the background.
    if (this.#witnesses.length > 0) this.#witnessing = this.#witnessing.then(() => this.#witness(latest));
  }

  /**
   * Appends `statement` (once per key) and resolves with its leaf index once it is durable. `at`
   * (ms) is when the fact it states became durable where it is kept: until the statement is
   * stored, the catch-up watermark stays below it. A statement whose append fails is tried again
   * (with backoff) while the process lives; the promise rejects all the same.
   */
  append(statement: Statement, at?: number): Promise<number> {
    if (this.#closed) return Promise.reject(new ValidationError("log-closed", "the transparency log is closed", { status: 503 }));
    const body = leafOf(statement).body;
    if (body.byteLength > MAX_ENTRY_BYTES) return Promise.reject(new ValidationError("log-entry-too-large", `a log entry has at most ${MAX_ENTRY_BYTES} bytes`));
    return new Promise<number>((resolve, reject) => {
      this.#queue.push({ statement, at, resolve, reject });
      this.#flushing ??= this.#flush();
    });
  }

  /** Statements queued while a batch is being stored go together as the next batch. */
  async #flush(): Promise<void> {
    // Wait out the current turn of the event loop, not one microtask: the claim store resolves a
    // whole group commit of records in one message, and each run's seal is attested a few
    // microtask hops after its record resolves. Waiting for the turn's end puts the seals of one
    // group commit into one log transaction (one fsync) instead of a transaction each, which
    // blocked the event loop once per run.
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (this.#queue.length > 0) {
      const batch = this.#queue;
      this.#queue = [];
      try {
        this.#faults?.beforeAppend?.(batch.map((p) => p.statement));
        const mark = this.#watermarkFor(batch);
        const indexes = await this.#store.append(
          batch.map((p) => leafOf(p.statement)),
          mark,
        );
        if (mark !== undefined) this.#storedMark = mark;
        if (this.#unlogged.size > 0) for (const p of batch) this.#unlogged.delete(statementKey(p.statement));
        let size = this.#known.size;
        for (const i of indexes) if (i >= size) size = i + 1;
        this.#known = { ...this.#known, size };
        batch.forEach((p, i) => p.resolve(indexes[i]!));
        this.#appendRetry.wait = this.#retryMs;
        this.#scheduleCheckpoint();
      } catch (error) {
        for (const p of batch) {
          this.#unlogged.set(statementKey(p.statement), { statement: p.statement, at: p.at });
          p.reject(error);
        }
        this.#scheduleAppendRetry();
      }
    }
    this.#flushing = undefined;
  }

  /**
   * The watermark stored with a batch: below every fact of the batch, and of any statement still
   * unlogged, by the margin (a fact whose record raced a later one may still be on its way).
   * Undefined (the stored one stays) when none of them carries a time.
   */
  #watermarkFor(batch: readonly Pending[]): number | undefined {
    let lowest = Infinity;
    for (const p of batch) if (p.at !== undefined && p.at < lowest) lowest = p.at;
    for (const u of this.#unlogged.values()) if (u.at !== undefined && u.at < lowest) lowest = u.at;
    const mark = lowest - this.#margin;
    return lowest === Infinity || mark < this.#storedMark + WATERMARK_STEP_MS ? undefined : mark;
  }

  #scheduleAppendRetry(): void {
    if (this.#appendRetry.timer !== undefined || this.#closed || this.#unlogged.size === 0) return;
    const wait = this.#appendRetry.wait;
    this.#appendRetry.wait = Math.min(wait * 2, MAX_RETRY_MS);
    this.#appendRetry.timer = setTimeout(() => {
      this.#appendRetry.timer = undefined;
      // Each failure re-queues itself (and re-arms this timer) inside append; nothing to catch here.
      for (const { statement, at } of [...this.#unlogged.values()]) this.append(statement, at).catch(() => undefined);
    }, wait);
    this.#appendRetry.timer.unref();
  }

  /**
   * The catch-up watermark (ms): every fact whose statement was attested with a time before it is
   * in the log; undefined for a log that never had one.
   */
  watermark(): Promise<number | undefined> {
    return this.#store.watermark();
  }

  /**
   * Raises the watermark to `at` minus the margin, after a caller checked that every fact before
   * `at` is logged (Warden's catch-up at start).
   */
  async advanceWatermark(at: number): Promise<void> {
    await this.#store.append([], at - this.#margin);
    this.#storedMark = Math.max(this.#storedMark, at - this.#margin);
  }

  #scheduleCheckpoint(): void {
    if (this.#timer !== undefined || this.#closed) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.checkpoint().catch((error: unknown) => this.#onWitnessError("(checkpoint)", error));
    }, this.#interval);
    this.#timer.unref();
  }

  /** Signs a checkpoint of the log's current size unless the latest one has it; resolves with the latest. */
  checkpoint(): Promise<StoredCheckpoint> {
    const next = this.#checkpointing.catch(() => undefined).then(() => this.#checkpointNow());
    this.#checkpointing = next;
    return next;
  }

  async #checkpointNow(): Promise<StoredCheckpoint> {
    const size = await this.#store.size();
    const latest = await this.#store.latestCheckpoint();
    if (latest !== undefined && latest.size >= size) return latest;
    const root = await this.#rootOf(size);
    const key = await this.#key();
    const note = signNote(formatCheckpoint({ origin: this.origin, size, root }), [ed25519NoteSigner(this.origin, key)]);
    await this.#store.saveCheckpoint({ size, note });
    // On a shared store another node may have signed this size first: serve the stored one.
    const stored = (await this.#store.checkpoint(size)) ?? { size, note };
    if (this.#witnesses.length > 0 && !this.#signedAt.has(size)) this.#signedAt.set(size, Date.now());
    this.#known = { ...this.#known, size: Math.max(this.#known.size, size), checkpointSize: Math.max(this.#known.checkpointSize, size) };
    if (this.#witnesses.length > 0) this.#witnessing = this.#witnessing.then(() => this.#witness(stored));
    return stored;
  }

  /** Submits `checkpoint` to each witness that has not cosigned it; a failure is reported, never thrown. */
  async #witness(checkpoint: StoredCheckpoint): Promise<void> {
    const witnessed = await this.#store.witnessed();
    let failed = false;
    await Promise.all(
      this.#witnesses.map(async (witness) => {
        try {
          let old = witnessed.get(witness.name) ?? 0;
          if (old >= checkpoint.size && old !== 0) return;
          for (let attempt = 0; attempt < 3; attempt++) {
            if (old > checkpoint.size) {
              // On a fleet's shared log another node signed and submitted a larger checkpoint first: nothing is left to do.
              if ((await this.#store.checkpoint(old)) !== undefined) return;
              throw new Error(`the witness has size ${old}, larger than the checkpoint's ${checkpoint.size}`);
            }
            const proof = await this.#consistencyHashes(old, checkpoint.size);
            const answer = await submitCheckpoint(witness, checkpoint.note, old, proof);
            if (answer.ok) {
              await this.#store.saveCosignature(checkpoint.size, witness.name, answer.lines);
              this.#witnessErrors.delete(witness.name);
              return;
            }
            if ("conflict" in answer) {
              old = answer.conflict;
              continue;
            }
            throw new Error(`HTTP ${answer.status}: ${answer.message}`);
          }
          throw new Error("the witness kept changing its size");
        } catch (error) {
          failed = true;
          const message = error instanceof Error ? error.message : String(error);
          this.#witnessErrors.set(witness.name, message);
          this.#onWitnessError(witness.name, error);
        }
      }),
    );
    this.#known = { ...this.#known, witnessed: await this.#store.witnessed() };
    this.#forgetCosigned();
    if (failed) this.#scheduleWitnessRetry();
    else this.#witnessRetry.wait = this.#retryMs;
  }

  /** Signing times of checkpoints every witness has cosigned are not needed for the lag any more. */
  #forgetCosigned(): void {
    const lowest = Math.min(...this.#witnesses.map((w) => this.#known.witnessed.get(w.name) ?? 0));
    for (const size of this.#signedAt.keys()) if (size < lowest) this.#signedAt.delete(size);
  }

  /**
   * A witness that failed gets the latest checkpoint again after a wait that doubles (up to a
   * minute) while it keeps failing, so it catches up when it is back even if no new leaf arrives.
   */
  #scheduleWitnessRetry(): void {
    if (this.#witnessRetry.timer !== undefined || this.#closed) return;
    const wait = this.#witnessRetry.wait;
    this.#witnessRetry.wait = Math.min(wait * 2, MAX_RETRY_MS);
    this.#witnessRetry.timer = setTimeout(() => {
      this.#witnessRetry.timer = undefined;
      this.catchUpWitnesses().catch((error: unknown) => this.#onWitnessError("(catch-up)", error));
    }, wait);
    this.#witnessRetry.timer.unref();
  }

  /** Resubmits the latest checkpoint to witnesses that are behind (a witness that was down catches up). */
  async catchUpWitnesses(): Promise<void> {
    const latest = await this.#store.latestCheckpoint();
    if (latest === undefined) return;
    this.#witnessing = this.#witnessing.then(() => this.#witness(latest));
    await this.#witnessing;
  }

  /** Waits for the witness submissions started so far. */
  async witnessed(): Promise<void> {
    await this.#witnessing;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    while (this.#flushing !== undefined) await this.#flushing;
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    clearTimeout(this.#appendRetry.timer);
    clearTimeout(this.#witnessRetry.timer);
    try {
      await this.checkpoint();
      await this.#witnessing;
    } finally {
      await this.#store.close();
    }
  }

  // --- reads -------------------------------------------------------------------------------

  async #reader(compute: (read: NodeReader) => unknown): Promise<NodeReader> {
    const nodes = await this.#store.nodes(nodesRead(compute));
    return (level, index) => {
      const hash = nodes.get(nodeKey(level, index));
      if (hash === undefined) throw new Error(`transparency log: stored node ${level}/${index} is missing`);
      return hash;
    };
  }

  /** The root hash of the log's tree of `size` leaves (0 ≤ size ≤ the log's size). */
  async rootAt(size: number): Promise<Hash> {
    if (!Number.isSafeInteger(size) || size < 0 || size > (await this.#store.size())) {
      throw new ValidationError("log-size-invalid", `the log has no tree of size ${size}`, { details: { size } });
    }
    return this.#rootOf(size);
  }

  async #rootOf(size: number): Promise<Hash> {
    return treeHash(size, await this.#reader((read) => treeHash(size, read)));
  }

  async #consistencyHashes(oldSize: number, newSize: number): Promise<Hash[]> {
    return consistencyProof(oldSize, newSize, await this.#reader((read) => consistencyProof(oldSize, newSize, read)));
  }

  /** The latest checkpoint, with the cosignatures witnesses returned for it. */
  async latestCheckpoint(): Promise<StoredCheckpoint> {
    const latest = (await this.#store.latestCheckpoint()) ?? (await this.checkpoint());
    return { size: latest.size, note: await this.#withCosignatures(latest) };
  }

  async #withCosignatures(checkpoint: StoredCheckpoint): Promise<string> {
    const lines = [...(await this.#store.cosignatures(checkpoint.size)).values()].join("");
    return checkpoint.note + lines;
  }

  async #checkpointSize(): Promise<number> {
    return (await this.#store.latestCheckpoint())?.size ?? 0;
  }

  /** A tile or entry bundle the latest checkpoint covers, or undefined (never an empty or uncovered one). */
  async tile(ref: TileRef): Promise<Buffer | undefined> {
    const size = await this.#checkpointSize();
    const level = ref.level === "entries" ? 0 : ref.level;
    const width = ref.width ?? TILE_WIDTH;
    const span = TILE_WIDTH ** level;
    // The tile's last hash must be a complete node of the checkpointed tree.
    if ((ref.index * TILE_WIDTH + width) * span > size) return undefined;
    const first = ref.index * TILE_WIDTH;
    if (ref.level === "entries") {
      const leaves = await this.#store.leaves(first, first + width);
      return Buffer.concat(leaves.flatMap((leaf) => [u16(leaf.byteLength), leaf]));
    }
    const ids = Array.from({ length: width }, (_, i) => ({ level: level * TILE_HEIGHT, index: first + i }));
    const nodes = await this.#store.nodes(ids);
    return Buffer.concat(ids.map((id) => nodes.get(nodeKey(id.level, id.index))!));
  }

  async inclusion(index: number, size?: number): Promise<InclusionProof> {
    const treeSize = size ?? (await this.#checkpointSize());
    if (!Number.isSafeInteger(index) || index < 0 || index >= treeSize || treeSize > (await this.#store.size())) {
      throw new NotFoundError("log-leaf-not-found", `leaf ${index} is not in the log's tree of size ${treeSize}`, { details: { index, size: treeSize } });
    }
    const proof = inclusionProof(index, treeSize, await this.#reader((read) => inclusionProof(index, treeSize, read)));
    return { index, size: treeSize, proof: proof.map((h) => h.toString("base64")) };
  }

  async consistency(oldSize: number, newSize: number): Promise<{ old: number; size: number; proof: string[] }> {
    if (!Number.isSafeInteger(oldSize) || !Number.isSafeInteger(newSize) || oldSize < 0 || oldSize > newSize || newSize > (await this.#store.size())) {
      throw new ValidationError("log-size-invalid", `no consistency proof from ${oldSize} to ${newSize}: sizes are 0 ≤ old ≤ new ≤ the log's size`, {
        details: { old: oldSize, size: newSize },
      });
    }
    return { old: oldSize, size: newSize, proof: (await this.#consistencyHashes(oldSize, newSize)).map((h) => h.toString("base64")) };
  }

  /**
   * Everything a verifier needs offline to check that run `runId`'s seal is logged: the leaf, its
   * inclusion proof, and the checkpoint it proves into — the one most witnesses cosigned.
   */
  async runProof(runId: string): Promise<RunProof> {
    return this.#leafProof(`run:${runId}`, `no seal of run ${runId} is in the transparency log`, runId);
  }

  /** The same for the `run.reconciled` leaf of an operator's receipt closing run `runId`. */
  async reconciliationProof(runId: string): Promise<RunProof> {
    return this.#leafProof(`reconciled:${runId}`, `no reconciliation of run ${runId} is in the transparency log`, runId);
  }

  /** The leaf logged under `key` (e.g. `run:<run_id>`) and its index, checkpointed or not yet; undefined when none is. */
  async leaf(key: string): Promise<{ readonly index: number; readonly leaf: Buffer } | undefined> {
    const index = await this.#store.indexOf(key);
    if (index === undefined) return undefined;
    const [leaf] = await this.#store.leaves(index, index + 1);
    return leaf === undefined ? undefined : { index, leaf };
  }

  async #leafProof(key: string, missing: string, runId: string): Promise<RunProof> {
    const index = await this.#store.indexOf(key);
    if (index === undefined) throw new NotFoundError("log-leaf-not-found", missing, { details: { run_id: runId } });
    const checkpoint = await this.#bestCheckpointFor(index);
    const inclusion = await this.inclusion(index, checkpoint.size);
    const [leaf] = await this.#store.leaves(index, index + 1);
    return { ...inclusion, leaf: leaf!.toString("utf8"), checkpoint: await this.#withCosignatures(checkpoint) };
  }

  async #bestCheckpointFor(index: number): Promise<StoredCheckpoint> {
    const latest = await this.checkpoint();
    if (latest.size <= index) throw new NotFoundError("log-leaf-not-found", `leaf ${index} is not checkpointed yet`, { details: { index } });
    // The largest size cosigned by the most witnesses, among those that contain the leaf.
    const sizes = [...(await this.#store.witnessed()).values()].filter((s) => s > index);
    const counts = new Map<number, number>();
    for (const s of sizes) counts.set(s, (counts.get(s) ?? 0) + 1);
    const best = [...counts.entries()].sort((a, b) => b[1] - a[1] || b[0] - a[0])[0]?.[0];
    return (best === undefined ? undefined : await this.#store.checkpoint(best)) ?? latest;
  }

  async status(): Promise<LogStatus> {
    const key = await this.#key();
    const checkpointSize = await this.#checkpointSize();
    const witnessed = await this.#store.witnessed();
    const size = await this.#store.size();
    this.#known = { size, checkpointSize, witnessed };
    return { origin: this.origin, vkey: formatVkey(this.origin, SIG_ED25519, key.public_key), ...this.snapshot() };
  }

  /**
   * The log's state as this process last saw it, without a store read (for metrics, which are
   * read synchronously): sizes, and per witness what it cosigned, how far behind it is, since when.
   */
  snapshot(now = Date.now()): Omit<LogStatus, "origin" | "vkey"> {
    const { size, checkpointSize, witnessed } = this.#known;
    return {
      size,
      checkpoint_size: checkpointSize,
      unlogged: this.#unlogged.size,
      witnesses: this.#witnesses.map((w) => {
        const cosigned = witnessed.get(w.name) ?? 0;
        const error = this.#witnessErrors.get(w.name);
        return {
          name: w.name,
          size: cosigned,
          behind: Math.max(0, checkpointSize - cosigned),
          lag_seconds: cosigned >= checkpointSize ? 0 : this.#lagSeconds(cosigned, now),
          ...(error === undefined ? {} : { last_error: error }),
        };
      }),
    };
  }

  #lagSeconds(cosigned: number, now: number): number {
    let oldest = now;
    for (const [size, at] of this.#signedAt) if (size > cosigned && at < oldest) oldest = at;
    return Math.max(0, (now - oldest) / 1000);
  }
}

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}
