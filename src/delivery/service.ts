/**
 * The `Delivery` service: bundle upload and catalog semantics (DESIGN.md "HTTP API v1" delivery
 * routes, G7–G11) on top of the store interfaces, for any backend. Stages are begun from a
 * validated manifest, filled by appending chunks to durable partials, and committed whole.
 */
import { parseDigest, type Digest } from "../core/digest.js";
import { ValidationError } from "../core/errors.js";
import { DEFAULT_LIMITS, isCount, isTime, type Limits } from "../core/limits.js";
import { readVerifiedBlob, type ByteSource } from "./blob-store.js";
import { bundleViews, revisionView, type BundleView, type CatalogEntry, type RevisionView } from "./catalog.js";
import type { TrustPolicy } from "../signing/policy.js";
import { BlobReads, NO_RULES } from "./blob-reads.js";
import { BundleCatalog, type DeliveryAttest } from "./bundle-catalog.js";
import { withSigners } from "./manifest-record.js";
import type { StoredSignature } from "./signature-record.js";
import { ChunkUpload, nothingMore, type ChunkAccepted } from "./chunk-upload.js";
import { verifyForCommit } from "./commit-verify.js";
import { applyFrames } from "./blob-pack.js";
import { checkContractAtBegin } from "./contract/check.js";
import {
  bundleNotFound,
  chunkTooLarge,
  guard,
  guardStream,
  senderBody,
  outOfOrder,
  overflow,
  revisionConflict,
  revisionNotFound,
  revisionRetired,
  stageBlobNotFound,
  stageCapacityExhausted,
  stageCommitted,
  stagedBytesExhausted,
  stageExpired,
  stageNotFound,
  throwIfIncomplete,
} from "./delivery-errors.js";
import { LockTable } from "./lock-table.js";
import { isDamagedRecord } from "./manifest-record.js";
import { parseManifest } from "./manifest.js";
import { receiptOf, type BlobRef, type CommitReceipt, type Manifest } from "./manifest-types.js";
import { collectUnreferencedBlobs, isStoredIntact, recoverDelivery, type DeliveryStores, type RecoveryReport } from "./recovery.js";
import { isExpired, missingOf, newStageId, parseStageId, type MissingBlob, type StageRecord } from "./stage.js";

export type { ChunkAccepted } from "./chunk-upload.js";

export interface PackOptions {
  /** the body's declared length, when the sender declared one: a frame past it is refused before it is applied */
  readonly declaredBytes?: number;
  /** told of each frame's data bytes as they are handed on (a node's count of blob bytes received) */
  readonly onBlobBytes?: (bytes: number) => void;
}

/** A blob pack applied whole. */
export interface PackAccepted {
  /** frames applied */
  readonly frames: number;
}

/** What a backend hands the service: its three stores, and how to release them. */
export interface DeliveryBackend extends DeliveryStores {
  /**
   * Runs a store-wide step (begin, gc, start-up recovery) while no other process sharing these
   * stores runs one. A backend only one process can open (the embedded store, under its lock)
   * leaves it out: the service's own lock table covers that process.
   */
  readonly storeWide?: <T>(step: () => Promise<T>) => Promise<T>;
  close(): Promise<void>;
}


export interface DeliveryOptions {
  readonly limits?: Limits;
  /** Milliseconds since the epoch; injectable so expiry can be tested without waiting. */
  readonly clock?: () => number;
  /** The node's trust policy for bundle signatures (none: signatures are verified, nothing required). */
  readonly trust?: TrustPolicy;
  /**
   * Told of each commit after it is durable, and of each signature added to a committed revision
   * after it is stored; again when a commit or signature is answered from the catalog (a crash
   * between the two then heals on the client's retry). The node's transparency log; none: no one.
   */
  readonly attest?: DeliveryAttest;
}

export interface StagingBegun {
  readonly stage_id: string;
  readonly manifest_digest: Digest;
  readonly committed: false;
  readonly missing: readonly MissingBlob[];
}

export interface CommittedBegun {
  readonly stage_id: string;
  readonly manifest_digest: Digest;
  readonly committed: true;
  readonly receipt: CommitReceipt;
  readonly missing: readonly [];
}

export type BeginResult = StagingBegun | CommittedBegun;

/** A stage being uploaded, and how far it got (the console's uploads in progress). */
export interface UploadProgress {
  readonly stage_id: string;
  readonly manifest_digest: Digest;
  readonly bundle_id: string;
  readonly revision: string;
  readonly created_at: string;
  readonly last_active_at: string;
  /** blobs the stage receives (those the node lacked when it began) */
  readonly blobs: number;
  readonly blobs_received: number;
  /** their bytes, as the manifest declares them */
  readonly bytes_declared: number;
  readonly bytes_received: number;
}

export interface StageStatus {
  readonly stage_id: string;
  readonly manifest_digest: Digest;
  readonly missing: readonly MissingBlob[];
  readonly committed?: true;
  readonly receipt?: CommitReceipt;
}

/**
 * Lock key under which the store-wide steps (`begin`, `gc`, start-up recovery) exclude each other:
 * gc must not delete a blob begin just counted as present.
 */
const STORE_KEY = "store";
const stageKey = (stageId: string): string => `stage:${stageId}`;
const blobKey = (stageId: string, digest: Digest): string => `blob:${stageId}:${digest}`;
/** A stage whose stored record is damaged (see abort). */
const DAMAGED = Symbol("damaged stage record");

/**
 * Uploads (begin, chunks, status, commit, abort, expiry, the stages in flight) and the store's
 * upkeep (start-up recovery, gc), with the two other services over the same stores: `catalog`
 * (what publishers and operators see of committed bundles) and `reads` (what materialization reads).
 */
export class Delivery {
  readonly limits: Limits;
  readonly catalog: BundleCatalog;
  readonly reads: BlobReads;
  readonly #backend: DeliveryBackend;
  readonly #clock: () => number;
  readonly #locks = new LockTable();
  readonly #chunks: ChunkUpload;
  readonly #trust: TrustPolicy | undefined;
  #recovery: RecoveryReport | undefined;
  /** Committed stages' files being removed after their commit was answered (see #removeAfterCommit). */
  readonly #removals = new Set<Promise<void>>();

  /** Told of each commit, and each signature added later, once durable (DeliveryOptions.attest). */
  readonly #attest: DeliveryAttest | undefined;

  constructor(backend: DeliveryBackend, options: DeliveryOptions = {}) {
    this.#backend = backend;
    this.limits = options.limits ?? DEFAULT_LIMITS;
    this.#clock = options.clock ?? Date.now;
    this.#chunks = new ChunkUpload(backend, this.limits);
    this.#trust = options.trust;
    this.#attest = options.attest;
    this.catalog = new BundleCatalog({ catalog: backend.catalog, clock: this.#clock, trust: this.#trust, attest: this.#attest });
    this.reads = new BlobReads({ catalog: backend.catalog, blobs: backend.blobs, limits: this.limits, trust: this.#trust });
  }

  /** Builds the service and runs start-up recovery (expiry, interrupted publications, GC). */
  static async open(backend: DeliveryBackend, options: DeliveryOptions = {}): Promise<Delivery> {
    const delivery = new Delivery(backend, options);
    delivery.#recovery = await delivery.#storeWide(() => recoverDelivery(backend, delivery.#clock(), delivery.limits));
    return delivery;
  }

  /** What start-up recovery did, when the service was built by `open`. */
  get recovery(): RecoveryReport | undefined {
    return this.#recovery;
  }

  /** Runs a store-wide step alone: in this process (lock table), then across processes (backend). */
  #storeWide<T>(step: () => Promise<T>): Promise<T> {
    const storeWide = this.#backend.storeWide;
    return this.#locks.exclusive(STORE_KEY, () => (storeWide === undefined ? step() : storeWide(step)));
  }

  async close(): Promise<void> {
    await Promise.all(this.#removals);
    await this.#backend.close();
  }

  /**
   * Starts (or resumes) the upload of a manifest. The same manifest while staging resumes the
   * same stage; an already committed one answers its receipt; blobs already stored are never
   * asked for (G9). Capacity refusals delete nothing (G11).
   */
  async begin(input: unknown): Promise<BeginResult> {
    return guard(async () => {
      const manifest = parseManifest(typeof input === "string" ? parseJsonText(input) : input, this.limits);
      checkContractAtBegin(manifest);
      await this.#sweepExpired();
      return this.#storeWide(async () => {
        const { catalog, stages } = this.#backend;
        const committed = await catalog.findByManifest(manifest.manifest_digest);
        if (committed !== undefined) {
          if (committed.retired_at !== null) throw revisionRetired(committed.bundle_id, committed.revision);
          return {
            stage_id: committed.stage_id,
            manifest_digest: committed.manifest_digest,
            committed: true,
            receipt: committed.receipt,
            missing: [],
          };
        }
        const sameRevision = await catalog.get(manifest.bundle_id, manifest.revision);
        if (sameRevision !== undefined) throw revisionConflict(manifest.bundle_id, manifest.revision, sameRevision.manifest_digest);
        const now = this.#clock();
        const staging = await stages.findByManifest(manifest.manifest_digest);
        const stage = staging === undefined ? await this.#createStage(manifest, now) : await this.#resume(staging, now);
        if (stage === undefined) {
          // The stage was committed while this begin waited for it.
          const entry = await catalog.findByManifest(manifest.manifest_digest);
          if (entry === undefined) throw stageNotFound(staging?.stage_id ?? "");
          return { stage_id: entry.stage_id, manifest_digest: entry.manifest_digest, committed: true, receipt: entry.receipt, missing: [] };
        }
        return { stage_id: stage.stage_id, manifest_digest: manifest.manifest_digest, committed: false, missing: missingOf(stage) };
      });
    });
  }

  async #createStage(manifest: Manifest, now: number): Promise<StageRecord> {
    const { blobs, stages } = this.#backend;
    const active = await stages.activity();
    if (active.length >= this.limits.activeStages) throw stageCapacityExhausted(active, this.limits.activeStages, now, this.limits.stageExpiryMs);
    const unique = receiptOf(manifest).blobs;
    const missing: BlobRef[] = [];
    const empty: BlobRef[] = [];
    for (const ref of unique) {
      if (ref.byte_len === 0) empty.push(ref);
      else if (!(await isStoredIntact(blobs, ref))) missing.push(ref);
    }
    const reserved = missing.reduce((sum, ref) => sum + ref.byte_len, 0);
    // A damaged reservation (not a byte count) reserves nothing: the stage still counts above.
    const staged = active.reduce((sum, s) => sum + (isCount(s.reserved_bytes) ? s.reserved_bytes : 0), 0);
    if (staged + reserved > this.limits.stagedBytes) throw stagedBytesExhausted(staged, reserved, this.limits.stagedBytes);
    // An empty blob needs no upload; publishing it verifies that its digest is the empty digest.
    for (const ref of empty) await blobs.put(ref, new Uint8Array(0));
    const stage: StageRecord = {
      stage_id: newStageId(),
      manifest,
      created_at: now,
      last_active_at: now,
      reserved_bytes: reserved,
      blobs: missing.map((ref) => ({ digest: ref.digest, byte_len: ref.byte_len, received: 0, complete: false })),
    };
    await stages.create(stage);
    return stage;
  }

  /**
   * Resumes a stage; a blob another bundle stored meanwhile is no longer asked for. Undefined
   * when the stage closed (committed) while waiting for its lock.
   */
  async #resume(stage: StageRecord, now: number): Promise<StageRecord | undefined> {
    const { blobs, stages } = this.#backend;
    await stages.touch(stage.stage_id, now);
    await this.#locks.shared(stageKey(stage.stage_id), async () => {
      for (const blob of stage.blobs) {
        if (blob.complete || blob.received === blob.byte_len || !(await blobs.has(blob.digest))) continue;
        await this.#locks.exclusive(blobKey(stage.stage_id, blob.digest), async () => {
          const ref = { digest: blob.digest, byte_len: blob.byte_len };
          if (await isStoredIntact(blobs, ref)) {
            await stages.markStored(stage.stage_id, ref);
            this.#chunks.forget(stage.stage_id, blob.digest);
          }
        });
      }
    });
    return stages.get(stage.stage_id);
  }

  /**
   * Appends one chunk at `offset` of a blob's partial: streamed straight to the file with an
   * incremental hash, acknowledged once it is part of the partial; the last chunk of a blob is
   * checked against the blob's digest. A chunk that replays bytes already received is accepted
   * without writing.
   */
  async putChunk(stageId: string, digest: string, offset: number, source: ByteSource): Promise<ChunkAccepted> {
    const body = source instanceof Uint8Array ? source : senderBody(source);
    return guard(async () => {
      const id = parseStageId(stageId);
      const blobDigest = parseDigest(digest, "blob digest");
      if (!Number.isSafeInteger(offset) || offset < 0) {
        throw new ValidationError("chunk-offset-invalid", "the chunk offset must be a non-negative integer", { details: { offset } });
      }
      if (body instanceof Uint8Array && body.byteLength > this.limits.chunkBytes) throw chunkTooLarge(body.byteLength, this.limits.chunkBytes);
      return this.#locks.shared(stageKey(id), () =>
        this.#locks.exclusive(blobKey(id, blobDigest), async () => {
          const now = this.#clock();
          // The one blob, not the whole stage: a push of N blobs sends N chunks or more.
          const target = await this.#live(await this.#backend.stages.chunkTarget(id, blobDigest), id, now);
          const blob = target.blob;
          if (blob === undefined) {
            // A refusal may read it all: a damaged blob row (its digest edited) is that, not a
            // blob the stage never had.
            await this.#liveStage(id, now);
            throw stageBlobNotFound(id, blobDigest);
          }
          const received = blob.complete ? blob.byte_len : blob.received;
          if (offset < received) return this.#chunks.replay(id, blob, offset, body, now);
          if (offset > received) throw outOfOrder(blob, received, offset);
          if (body instanceof Uint8Array && offset + body.byteLength > blob.byte_len) throw overflow(blob, offset + body.byteLength);
          if (received === blob.byte_len) return nothingMore(blob, body);
          return this.#chunks.append(id, blob, body, now);
        }),
      );
    });
  }

  /**
   * Applies a blob pack (DESIGN.md "Blob packs"): each frame, in order, exactly as `putChunk` with
   * the frame's digest, offset and bytes (its bytes handed on as they arrive, never gathered). A
   * failure at frame k keeps frames 0…k-1 (each a complete chunk) and names the frame in the
   * error's details.
   */
  async putPack(stageId: string, source: ByteSource, options: PackOptions = {}): Promise<PackAccepted> {
    return guard(async () => {
      const id = parseStageId(stageId);
      const frames = await applyFrames(source, { limitBytes: this.limits.chunkBytes, ...options }, async (frame) => {
        await this.putChunk(id, frame.digest, frame.offset, frame.body);
      });
      return { frames };
    });
  }

  async status(stageId: string): Promise<StageStatus> {
    return guard(async () => {
      const id = parseStageId(stageId);
      const committed = await this.#backend.catalog.findByStage(id);
      if (committed !== undefined) {
        return { stage_id: id, manifest_digest: committed.manifest_digest, missing: [], committed: true, receipt: committed.receipt };
      }
      const now = this.#clock();
      const stage = await this.#liveStage(id, now);
      await this.#backend.stages.touch(id, now);
      return { stage_id: id, manifest_digest: stage.manifest.manifest_digest, missing: missingOf(stage) };
    });
  }

  /**
   * Commits a fully uploaded stage: every blob read back and checked against its digest, the
   * bundle digest recomputed over them in path order and the bundle contract checked on the bytes
   * (commit-verify.ts); the received blobs made durable and published; the blobs' directory
   * entries made durable; then the commit record written durably in one transaction that also
   * closes the stage. Idempotent: a committed stage id answers the same receipt, also after a
   * restart.
   *
   * `signatures` (armored SSHSIG over the revision's statement) are verified and judged by the
   * trust policy first: a refusal (DESIGN.md "Bundle signatures") leaves the stage as it was and
   * stores nothing.
   */
  async commit(stageId: string, signatures: readonly string[] = []): Promise<CommitReceipt> {
    const entry = await this.#commit(stageId, signatures);
    await this.#attest?.commit(entry);
    return entry.receipt;
  }

  async #commit(stageId: string, signatures: readonly string[]): Promise<CatalogEntry> {
    return guard(async () => {
      const id = parseStageId(stageId);
      const { catalog } = this.#backend;
      const done = await catalog.findByStage(id);
      if (done !== undefined) return done;
      return this.#locks.exclusive(stageKey(id), async () => {
        const replay = await catalog.findByStage(id);
        if (replay !== undefined) return replay;
        const stage = await this.#liveStage(id, this.#clock());
        throwIfIncomplete(stage);
        const manifest = stage.manifest;
        const committedAt = this.#clock();
        const signed = this.#acceptSignatures(manifest, signatures, committedAt);
        await this.#publish(stage);
        await this.#backend.blobs.sync(receiptOf(manifest).blobs.map((b) => b.digest));
        const entry = await catalog.record(
          {
            bundle_id: manifest.bundle_id,
            revision: manifest.revision,
            manifest_digest: manifest.manifest_digest,
            stage_id: id,
            receipt: withSigners(receiptOf(manifest), signed),
            committed_at: committedAt,
            retired_at: null,
            signatures: signed,
          },
          manifest,
        );
        this.#forget(id);
        this.#removeAfterCommit(id);
        return entry;
      });
    });
  }

  /**
   * Removes a committed stage's files (and, where the catalog's record has not, its metadata) after
   * the commit is answered: the record made the commit durable and closed the stage, and nothing
   * the reply says depends on them. A failure to delete them must not turn the commit into an
   * error: start-up recovery removes a stage directory that has no metadata. `close` waits for
   * the removals still running.
   */
  #removeAfterCommit(stageId: string): void {
    const removal: Promise<void> = this.#locks
      .exclusive(stageKey(stageId), () => this.#backend.stages.remove(stageId))
      .catch(() => undefined)
      .finally(() => this.#removals.delete(removal));
    this.#removals.add(removal);
  }

  #acceptSignatures(manifest: Manifest, signatures: readonly string[], now: number): StoredSignature[] {
    if (this.#trust === undefined && signatures.length === 0) return [];
    const trust = this.#trust ?? NO_RULES;
    return trust.accept(manifest, signatures, now).map((s) => ({ ...s, at_commit: true }));
  }

  /**
   * Verifies a complete stage and publishes the blobs it received. Their partials are made durable
   * (most already were, in the background, as each completed) while the verification reads them,
   * and nothing is published before both are done. Publications go in parallel.
   */
  async #publish(stage: StageRecord): Promise<void> {
    const { stages } = this.#backend;
    const id = stage.stage_id;
    const received = stage.blobs.filter((b) => !b.complete).map((b) => ({ digest: b.digest, byte_len: b.byte_len }));
    const inline = this.#chunks.takeInlineCheck(id);
    const verify = async (): Promise<void> => {
      // Checked as the blobs arrived, and no partial written since: nothing to read back.
      if (inline !== undefined && (await inline.passed(stages, id))) return;
      await verifyForCommit(this.#backend, stage, this.limits, (digest) => this.#chunks.verified(id, digest));
    };
    const [durable, verified] = await Promise.allSettled([stages.syncReceived(id, received), verify()]);
    // A partial that could not be made durable is dropped while the verification may be reading
    // it: its failure is the cause of whatever the verification then met.
    if (durable.status === "rejected") throw durable.reason;
    if (verified.status === "rejected") throw verified.reason;
    const now = this.#clock();
    const published = await Promise.allSettled(received.map((ref) => stages.promote(id, ref, now)));
    for (const ref of received) this.#chunks.forget(id, ref.digest);
    const failed = published.find((p): p is PromiseRejectedResult => p.status === "rejected");
    if (failed !== undefined) throw failed.reason;
  }

  async abort(stageId: string): Promise<void> {
    return guard(async () => {
      const id = parseStageId(stageId);
      await this.#locks.exclusive(stageKey(id), async () => {
        const stage = await this.#backend.stages.get(id).catch((error: unknown) => {
          // A damaged stage record can be neither resumed nor committed, only dropped: aborting it
          // is how an operator clears it (expiry leaves it in place). Removal goes by the stage id
          // alone, not by what the record says.
          if (isDamagedRecord(error)) return DAMAGED;
          throw error;
        });
        if (stage === undefined) {
          if ((await this.#backend.catalog.findByStage(id)) !== undefined) return;
          throw stageNotFound(id);
        }
        this.#forget(id);
        await this.#backend.stages.remove(id);
      });
    });
  }

  /** Removes stages inactive for `limits.stageExpiryMs`; returns how many. */
  async expire(): Promise<number> {
    return guard(async () => {
      return this.#sweepExpired();
    });
  }

  async #sweepExpired(): Promise<number> {
    let removed = 0;
    for (const candidate of await this.#backend.stages.activity()) {
      if (!isTime(candidate.last_active_at) || !isExpired(candidate, this.#clock(), this.limits.stageExpiryMs)) continue;
      await this.#locks.exclusive(stageKey(candidate.stage_id), async () => {
        // A damaged stage is left for an operator to see and abort, not swept away unseen, and
        // it does not stop the sweep of the others.
        const stage = await this.#backend.stages.get(candidate.stage_id).catch((error: unknown) => {
          if (isDamagedRecord(error)) return undefined;
          throw error;
        });
        if (stage === undefined || !isExpired(stage, this.#clock(), this.limits.stageExpiryMs)) return;
        this.#forget(stage.stage_id);
        await this.#backend.stages.remove(stage.stage_id);
        removed++;
      });
    }
    return removed;
  }

  /**
   * Every stage being uploaded now, by any node sharing these stores, oldest first, with the
   * bytes received of those declared. Expired stages (swept at the next chance) and damaged
   * records (refused where they are used) are left out.
   */
  async uploads(): Promise<UploadProgress[]> {
    return guard(async () => {
      const now = this.#clock();
      const stages: StageRecord[] = [];
      for (const candidate of await this.#backend.stages.activity()) {
        if (!isTime(candidate.last_active_at) || isExpired(candidate, now, this.limits.stageExpiryMs)) continue;
        const stage = await this.#backend.stages.get(candidate.stage_id).catch((error: unknown) => {
          if (isDamagedRecord(error)) return undefined;
          throw error;
        });
        if (stage !== undefined) stages.push(stage);
      }
      return stages.sort((a, b) => a.created_at - b.created_at).map(progressOf);
    });
  }

  /** Deletes every blob no live revision and no active stage references; returns how many. */
  async gc(): Promise<number> {
    return guard(async () => {
      await this.#sweepExpired();
      return this.#storeWide(() => collectUnreferencedBlobs(this.#backend));
    });
  }

  /** A stage that exists and has not expired (expired ones are removed by the next sweep). */
  async #liveStage(stageId: string, now: number): Promise<StageRecord> {
    return this.#live(await this.#backend.stages.get(stageId), stageId, now);
  }

  /** `stage` (as read) when it exists and has not expired; else why not. */
  async #live<T extends Pick<StageRecord, "last_active_at">>(stage: T | undefined, stageId: string, now: number): Promise<T> {
    if (stage === undefined) {
      if ((await this.#backend.catalog.findByStage(stageId)) !== undefined) throw stageCommitted(stageId);
      throw stageNotFound(stageId);
    }
    if (isExpired(stage, now, this.limits.stageExpiryMs)) throw stageExpired(stageId, this.limits.stageExpiryMs);
    return stage;
  }

  #forget(stageId: string): void {
    this.#chunks.forget(stageId);
  }
}

function parseJsonText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ValidationError("manifest-json-invalid", "the manifest is not valid JSON", { cause: error });
  }
}

function progressOf(stage: StageRecord): UploadProgress {
  let received = 0;
  let declared = 0;
  let done = 0;
  for (const blob of stage.blobs) {
    const got = blob.complete ? blob.byte_len : Math.min(blob.received, blob.byte_len);
    declared += blob.byte_len;
    received += got;
    if (got === blob.byte_len) done++;
  }
  return {
    stage_id: stage.stage_id,
    manifest_digest: stage.manifest.manifest_digest,
    bundle_id: stage.manifest.bundle_id,
    revision: stage.manifest.revision,
    created_at: new Date(stage.created_at).toISOString(),
    last_active_at: new Date(stage.last_active_at).toISOString(),
    blobs: stage.blobs.length,
    blobs_received: done,
    bytes_declared: declared,
    bytes_received: received,
  };
}
