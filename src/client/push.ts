/**
 * `push`: deliver a directory to a node (DESIGN.md "CLI" `warden push`, G9). The directory is
 * compiled and validated client-side (the bytes read then are the ones uploaded), the stage begun
 * (or resumed: the same manifest resumes the same stage), only the blobs the node reports missing
 * are uploaded, each from the offset the node reports, and the stage is committed. Transient failures re-sync from the node's offsets and
 * retry with bounded backoff, so a push that was killed, or whose connection dropped, resumes by
 * simply running again and never re-sends an acknowledged byte.
 */
import { basename, resolve } from "node:path";
import { digestHex } from "../core/digest.js";
import { compileDirectory, readCompiledFile, type CompiledFile, type CompileOptions } from "../delivery/compile/directory.js";
import { DigestCache, sharedDigestCache } from "../delivery/compile/digest-cache.js";
import { sharedSlabCache } from "../delivery/compile/slab-cache.js";
import { createManifest } from "../delivery/manifest.js";
import type { ComponentKind, ComponentScope, Manifest } from "../delivery/manifest-types.js";
import { FRAME_HEADER_BYTES, packBytes, type PackChunk } from "../delivery/blob-pack-frame.js";
import { WardenHttpError } from "./errors.js";
import { forEachConcurrent } from "./pool.js";
import { backoffDelay, isTransient, sleep } from "./transport.js";
import { announcedChunkBytes, isCommitted, positiveSafeInteger, type BeginStageReply, type CommitReceipt, type CommitReply, type MissingBlob, type RevisionView, type SignerView, type StageStatus } from "./wire.js";
import { bundleStatement } from "../signing/statement.js";
import { sshSign, type SignWith, type SshSignOptions } from "./ssh-sign.js";

/** The delivery routes push drives; WardenClient implements them. */
export interface StageApi {
  beginStage(manifest: Manifest, options?: { retry?: boolean }): Promise<BeginStageReply>;
  /** `bytes` (here and in a pack's frames) may be a view on shared memory, the compile's: copy it for a WHATWG fetch */
  uploadChunk(stageId: string, digest: string, offset: number, bytes: Uint8Array): Promise<{ nextOffset: number }>;
  /**
   * Sends whole blobs (each from its offset) in one request, as a blob pack; without it, or when
   * the node does not know packs, every blob goes by `uploadChunk`.
   */
  uploadPack?(stageId: string, frames: readonly PackChunk[]): Promise<void>;
  stageStatus(stageId: string, options?: { retry?: boolean }): Promise<StageStatus>;
  commitStage(stageId: string, options?: { retry?: boolean; signatures?: readonly string[] }): Promise<CommitReply>;
  /** Adds a signature to a committed revision (a push with a signature of a revision already committed). */
  addSignature?(bundleId: string, revision: string, signature: string): Promise<RevisionView>;
}

export type PushPhase = "compiled" | "begun" | "uploading" | "committing" | "committed";

export interface PushProgress {
  readonly phase: PushPhase;
  readonly bundleId: string;
  readonly revision: string;
  /** bytes of the bundle's unique blobs */
  readonly bytesTotal: number;
  /** bytes the node holds (stored before, or acknowledged by this push) */
  readonly bytesDone: number;
  /** bytes this push put on the wire so far */
  readonly bytesSent: number;
  readonly blobsTotal: number;
  /** blobs still missing on the node */
  readonly blobsMissing: number;
}

export interface ChunkInfo {
  readonly digest: string;
  readonly offset: number;
  readonly length: number;
}

export interface PushHooks {
  /** Called after each chunk the node acknowledged (test seam: kill the process mid-upload). */
  readonly afterChunk?: (chunk: ChunkInfo & { readonly nextOffset: number }) => void | Promise<void>;
}

export interface PushOptions {
  /** default: the directory's base name */
  readonly bundleId?: string;
  /** default: the first 12 hex digits of the bundle digest (same content, same revision) */
  readonly revision?: string;
  /**
   * bytes per PATCH; default 4 MiB (the node's limit is 8 MiB by default). Blobs whose missing
   * bytes fit go whole, several to a request (a blob pack, at most this many bytes with its
   * framing); a larger blob goes in chunks of this size. A node whose limit (`chunk_bytes` in its
   * begin answer) is lower is sent requests within its limit from the first. One that does not
   * name it (it predates the field), or whose limit fell since, answers `413 chunk-too-large`
   * with its `limit`: the refused request (nothing of it applied) is sent again in requests
   * within that limit, and so is every later one of this push.
   */
  readonly chunkBytes?: number;
  /** requests in flight at once (a large blob's chunks, or a pack of small blobs); default 4 */
  readonly concurrency?: number;
  /** attempts after a transient failure, per blob and per begin/commit; default 6 */
  readonly retries?: number;
  /** first backoff delay in ms (doubled per attempt, capped at 2 s); default 100 */
  readonly backoffMs?: number;
  readonly kinds?: Readonly<Record<string, ComponentKind>>;
  readonly scope?: ComponentScope;
  readonly limits?: CompileOptions["limits"];
  readonly onProgress?: (progress: PushProgress) => void;
  readonly hooks?: PushHooks;
  /**
   * Sign the revision's statement with this key (DESIGN.md "Bundle signatures") through
   * `ssh-keygen -Y sign` before anything is uploaded; the signature goes with the commit.
   */
  readonly sign?: SignWith;
  readonly signOptions?: SshSignOptions;
  /**
   * Digests of earlier compiles to reuse for files whose identity (device, inode, size, mtime,
   * ctime) is unchanged; default the process-wide cache, `false` to hash every file.
   */
  readonly digestCache?: DigestCache | false;
}

export interface PushResult {
  readonly receipt: CommitReceipt;
  readonly stageId: string;
  /** chunk bytes this run put on the wire (retries included): 0 when nothing was missing */
  readonly bytesSent: number;
  /** blobs this run uploaded to completion */
  readonly blobsSent: number;
  /** the node already held this exact manifest committed: nothing was uploaded */
  readonly alreadyCommitted: boolean;
  /** files of the directory left out (`.git`, `node_modules`) */
  readonly skipped: readonly string[];
  /** the revision's signers after this push (empty when unsigned) */
  readonly signers: readonly SignerView[];
}

/**
 * A request's fixed cost on the node (routing, hooks, a partial's open and close, the reply) was
 * about 1.5 ms of CPU beyond its bytes: 4 MiB per request took a 32 MiB push from 43 requests to
 * 9 and its node CPU down by some 15% (8 MiB, the node's default limit, gained nothing more). What
 * a request cut off mid-body loses is at most one blob's frame in a pack (the frames before it are
 * kept) or one chunk of a large blob, whose chunks go one at a time: at most 4 MiB per request in
 * flight, sent again on resume. Neither side gathers a request in memory beyond the pack's one
 * encoding on the client.
 */
export const DEFAULT_CHUNK_BYTES = 4 * 1024 * 1024;
const DEFAULT_CONCURRENCY = 4;
const DEFAULT_RETRIES = 6;
/** Compile-time placeholder: the bundle digest (hence a derived revision) is known only after reading. */
const PENDING_REVISION = "pending";

/** The revision `push` derives when none is given: stable for the same bytes and paths. */
export function derivedRevision(manifest: Pick<Manifest, "bundle_digest">): string {
  return digestHex(manifest.bundle_digest).slice(0, 12);
}

export interface CompiledPush {
  readonly manifest: Manifest;
  readonly files: readonly CompiledFile[];
  readonly skipped: readonly string[];
  /** the compiled (read, digested, validated) bytes by relative path: what is uploaded (views on shared memory) */
  readonly contents?: ReadonlyMap<string, Uint8Array>;
  /** the shared memory `contents` are views on (CompiledBundle.slab) */
  readonly slab?: SharedArrayBuffer;
}

/** Compiles `dir` for a push, defaulting the bundle id and the revision as `push` documents. */
export async function compileForPush(dir: string, options: PushOptions = {}): Promise<CompiledPush> {
  const bundleId = options.bundleId ?? basename(resolve(dir));
  const compiled = await compileDirectory(dir, {
    bundleId,
    revision: options.revision ?? PENDING_REVISION,
    ...(options.kinds !== undefined ? { kinds: options.kinds } : {}),
    ...(options.scope !== undefined ? { scope: options.scope } : {}),
    ...(options.limits !== undefined ? { limits: options.limits } : {}),
    keepContents: true,
    // Pushing one tree to many nodes, or again, hashes it once (see the cache's rules).
    digestCache: options.digestCache === false ? undefined : (options.digestCache ?? sharedDigestCache()),
    // A push after this one in this process reads into the same memory (pushDirectory gives it back).
    slabs: sharedSlabCache(),
  });
  if (options.revision !== undefined) return compiled;
  const { manifest_digest: _, ...body } = compiled.manifest;
  const manifest = createManifest({ ...body, revision: derivedRevision(compiled.manifest) }, options.limits);
  const files = manifest.components.map((component, i) => ({ component, absolutePath: compiled.files[i]!.absolutePath }));
  const { contents, slab } = compiled;
  return { manifest, files, skipped: compiled.skipped, ...(contents !== undefined ? { contents } : {}), ...(slab !== undefined ? { slab } : {}) };
}

function hasCode(error: unknown, ...codes: string[]): error is WardenHttpError {
  return error instanceof WardenHttpError && codes.includes(error.code);
}

/**
 * The node does not serve blob packs: one that predates them answers its route `404
 * route-not-found` (a proxy in front, a bare 404), one that refuses the media type 415.
 */
export function isPackUnsupported(error: unknown): boolean {
  if (!(error instanceof WardenHttpError)) return false;
  return error.status === 415 || (error.status === 404 && (error.code === "route-not-found" || error.code === "http-404"));
}

/** A blob's upload: whole, in a pack with others, or alone in chunks. */
type UploadTask = { readonly pack: string[] } | { readonly blob: string };

function positiveInteger(value: number | undefined, fallback: number, what: string): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0) throw new RangeError(`${what} must be a positive integer`);
  return value;
}

class PushRun {
  readonly #api: StageApi;
  readonly #manifest: Manifest;
  readonly #byDigest = new Map<string, CompiledFile>();
  readonly #contents: ReadonlyMap<string, Uint8Array> | undefined;
  /** bytes per request: the option, lowered to the node's limit when that is lower (announced at begin, or learned from a 413) */
  #chunkBytes: number;
  readonly #concurrency: number;
  readonly #retries: number;
  readonly #backoffMs: number;
  readonly #options: PushOptions;
  /** node-acknowledged offset of every blob still missing */
  readonly #offsets = new Map<string, number>();
  readonly #bytesTotal: number;
  readonly #blobsTotal: number;
  #bytesDone = 0;
  #bytesSent = 0;
  #blobsSent = 0;
  /** false once the node answered that it does not serve blob packs: the rest goes blob by blob */
  #packs: boolean;

  constructor(api: StageApi, compiled: CompiledPush, options: PushOptions) {
    this.#api = api;
    this.#manifest = compiled.manifest;
    this.#options = options;
    this.#contents = compiled.contents;
    for (const file of compiled.files) this.#byDigest.set(file.component.blob.digest, file);
    this.#chunkBytes = positiveInteger(options.chunkBytes, DEFAULT_CHUNK_BYTES, "chunkBytes");
    this.#concurrency = positiveInteger(options.concurrency, DEFAULT_CONCURRENCY, "concurrency");
    this.#retries = options.retries ?? DEFAULT_RETRIES;
    this.#backoffMs = options.backoffMs ?? 100;
    this.#blobsTotal = this.#byDigest.size;
    this.#bytesTotal = [...this.#byDigest.values()].reduce((sum, f) => sum + f.component.blob.byte_len, 0);
    this.#packs = api.uploadPack !== undefined;
  }

  #report(phase: PushPhase): void {
    this.#options.onProgress?.({
      phase,
      bundleId: this.#manifest.bundle_id,
      revision: this.#manifest.revision,
      bytesTotal: this.#bytesTotal,
      bytesDone: this.#bytesDone,
      bytesSent: this.#bytesSent,
      blobsTotal: this.#blobsTotal,
      blobsMissing: this.#offsets.size,
    });
  }

  /** Adopts the node's view of what is missing (after begin, a re-sync or an incomplete commit). */
  #adopt(missing: readonly MissingBlob[]): void {
    this.#offsets.clear();
    let outstanding = 0;
    for (const m of missing) {
      if (!this.#byDigest.has(m.digest)) {
        throw new WardenHttpError(502, { code: "stage-blob-unknown", detail: `the node asks for blob ${m.digest}, which this bundle does not hold` }, { method: "GET", path: "/v1/stages" });
      }
      this.#offsets.set(m.digest, m.offset);
      outstanding += m.byte_len - m.offset;
    }
    this.#bytesDone = this.#bytesTotal - outstanding;
  }

  #advance(digest: string, offset: number): void {
    const before = this.#offsets.get(digest);
    if (before === undefined) return;
    this.#bytesDone += offset - before;
    this.#offsets.set(digest, offset);
  }

  #settle(digest: string): void {
    const before = this.#offsets.get(digest);
    if (before === undefined) return;
    this.#bytesDone += this.#byDigest.get(digest)!.component.blob.byte_len - before;
    this.#offsets.delete(digest);
  }

  /** Repeats `step` after transient failures, with backoff, at most `retries` times. */
  async #withRetries<T>(step: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await step();
      } catch (error) {
        if (!isTransient(error) || attempt >= this.#retries) throw error;
        await sleep(backoffDelay(attempt, this.#backoffMs));
      }
    }
  }

  async run(): Promise<PushResult> {
    this.#report("compiled");
    // Signed first: a signing that fails (no key, a wrong passphrase) has sent nothing.
    const sign = this.#options.sign;
    const signatures = sign === undefined ? [] : [await sshSign(bundleStatement(this.#manifest), sign, this.#options.signOptions)];
    const begun = await this.#withRetries(() => this.#api.beginStage(this.#manifest, { retry: false }));
    if (isCommitted(begun)) {
      this.#adopt([]);
      this.#report("committed");
      if (signatures.length === 0 || this.#api.addSignature === undefined) return this.#result(begun.receipt, begun.stage_id, true);
      const { bundle_id, revision } = this.#manifest;
      const view = await this.#withRetries(() => this.#api.addSignature!(bundle_id, revision, signatures[0]!));
      return { ...this.#result(begun.receipt, begun.stage_id, true), signers: view.signatures };
    }
    const stageId = begun.stage_id;
    const limit = announcedChunkBytes(begun);
    if (limit !== undefined) this.#chunkBytes = Math.min(this.#chunkBytes, limit);
    this.#adopt(begun.missing);
    this.#report("begun");
    for (let round = 0; ; round++) {
      if (this.#offsets.size > 0) {
        this.#report("uploading");
        await forEachConcurrent(this.#plan(this.#offsets.keys()), this.#concurrency, (task) => this.#upload(stageId, task));
      }
      this.#report("committing");
      try {
        const { receipt } = await this.#withRetries(() => this.#api.commitStage(stageId, { retry: false, signatures }));
        this.#report("committed");
        return this.#result(receipt, stageId, false);
      } catch (error) {
        // The node found a blob gone or damaged at commit and asks for it again.
        if (!hasCode(error, "stage-incomplete", "blob-tampered") || round >= this.#retries) throw error;
        const status = await this.#withRetries(() => this.#api.stageStatus(stageId, { retry: false }));
        this.#adopt(status.missing);
      }
    }
  }

  #result(receipt: CommitReceipt, stageId: string, alreadyCommitted: boolean): PushResult {
    return { receipt, stageId, bytesSent: this.#bytesSent, blobsSent: this.#blobsSent, alreadyCommitted, skipped: [], signers: receipt.signers ?? [] };
  }

  /**
   * These missing blobs as upload tasks, in manifest order: a blob whose missing bytes fit a pack
   * goes whole into the current pack (a new one when it is full), a larger one alone in chunks.
   */
  #plan(digests: Iterable<string>): UploadTask[] {
    const wanted = new Set(digests);
    const tasks: UploadTask[] = [];
    let pack: string[] | undefined;
    let packed = 0;
    for (const file of this.#byDigest.values()) {
      const digest = file.component.blob.digest;
      const offset = this.#offsets.get(digest);
      if (offset === undefined || !wanted.has(digest)) continue;
      const frame = FRAME_HEADER_BYTES + file.component.blob.byte_len - offset;
      if (!this.#packs || frame > this.#chunkBytes) {
        tasks.push({ blob: digest });
        continue;
      }
      if (pack === undefined || packed + frame > this.#chunkBytes) {
        pack = [];
        packed = 0;
        tasks.push({ pack });
      }
      pack.push(digest);
      packed += frame;
    }
    return tasks;
  }

  #upload(stageId: string, task: UploadTask): Promise<void> {
    return "pack" in task ? this.#uploadPack(stageId, task.pack) : this.#uploadBlob(stageId, task.blob);
  }

  /**
   * After a request refused as over the node's chunk limit (`413 chunk-too-large`, answered
   * before any of it was read, or a proxy's bare 413 before it reached the node): lowers this
   * run's request size to the node's `limit`, or without one to half the refused request, and
   * answers true; false for any other error, or a refused request of one byte. The refused
   * request's bytes then go again in smaller ones: each try is smaller than the last, so this
   * ends.
   */
  #fitLimit(error: unknown, refusedBytes: number): boolean {
    if (!(error instanceof WardenHttpError) || error.status !== 413 || (error.code !== "chunk-too-large" && error.code !== "http-413")) return false;
    const limit = positiveSafeInteger(error.problem.limit);
    const fits = limit !== undefined && limit < refusedBytes ? limit : Math.floor(refusedBytes / 2);
    if (fits < 1) return false;
    this.#chunkBytes = Math.min(this.#chunkBytes, fits);
    return true;
  }

  /** The bytes of a blob, as compile read them. */
  async #bytesOf(digest: string): Promise<Uint8Array> {
    const file = this.#byDigest.get(digest)!;
    // The bytes compile read and validated: the push delivers that snapshot even if a file is
    // edited meanwhile. Without them, the file is re-read and must still match its digest.
    return this.#contents?.get(file.component.relative_path) ?? (await readCompiledFile(file));
  }

  /**
   * Uploads whole blobs in one blob pack. A node that does not serve packs gets these and every
   * later blob one by one; after a failure that resuming can mend, the blobs go on one by one from
   * where the node says they stand (the frames before the failed one were applied).
   */
  async #uploadPack(stageId: string, digests: readonly string[]): Promise<void> {
    if (!this.#packs) return this.#oneByOne(stageId, digests);
    const frames: PackChunk[] = [];
    for (const digest of digests) {
      const offset = this.#offsets.get(digest);
      if (offset !== undefined) frames.push({ digest, offset, bytes: (await this.#bytesOf(digest)).subarray(offset) });
    }
    if (frames.length === 0) return;
    const data = frames.reduce((sum, f) => sum + f.bytes.byteLength, 0);
    this.#bytesSent += data;
    try {
      await this.#api.uploadPack!(stageId, frames);
    } catch (error) {
      if (isPackUnsupported(error)) {
        this.#packs = false;
        return this.#oneByOne(stageId, digests);
      }
      // Nothing of the pack was applied: its blobs go again, packed within the node's limit (and
      // its bytes count as sent when they are taken).
      if (this.#fitLimit(error, packBytes(frames))) {
        this.#bytesSent -= data;
        for (const task of this.#plan(digests)) await this.#upload(stageId, task);
        return;
      }
      if (!isTransient(error) && !hasCode(error, "chunk-out-of-order", "blob-digest-mismatch")) throw error;
      if (isTransient(error)) await sleep(backoffDelay(0, this.#backoffMs));
      await this.#resync(stageId, digests);
      return this.#oneByOne(stageId, digests);
    }
    for (const frame of frames) {
      this.#blobsSent++;
      this.#settle(frame.digest);
      await this.#options.hooks?.afterChunk?.({ digest: frame.digest, offset: frame.offset, length: frame.bytes.byteLength, nextOffset: frame.offset + frame.bytes.byteLength });
    }
    this.#report("uploading");
  }

  /** Adopts the node's offsets of these blobs; one it no longer asks for is whole (a pack's frame applied it). */
  async #resync(stageId: string, digests: readonly string[]): Promise<void> {
    let status: StageStatus;
    try {
      status = await this.#withRetries(() => this.#api.stageStatus(stageId, { retry: false }));
    } catch (resync) {
      // Unreachable still: each blob's own retries take it from the offsets known.
      if (!isTransient(resync)) throw resync;
      return;
    }
    const missing = new Map(status.missing.map((m) => [m.digest, m.offset]));
    for (const digest of digests) {
      if (!this.#offsets.has(digest)) continue;
      const offset = missing.get(digest);
      if (offset !== undefined) {
        this.#advance(digest, offset);
        continue;
      }
      this.#blobsSent++;
      this.#settle(digest);
    }
  }

  async #oneByOne(stageId: string, digests: readonly string[]): Promise<void> {
    for (const digest of digests) if (this.#offsets.has(digest)) await this.#uploadBlob(stageId, digest);
  }

  async #uploadBlob(stageId: string, digest: string): Promise<void> {
    const bytes = await this.#bytesOf(digest);
    const length = bytes.byteLength;
    let offset = this.#offsets.get(digest) ?? length;
    let failures = 0;
    let sent = false;
    while (offset < length) {
      const end = Math.min(offset + this.#chunkBytes, length);
      const chunk = { digest, offset, length: end - offset };
      try {
        this.#bytesSent += chunk.length;
        sent = true;
        const { nextOffset } = await this.#api.uploadChunk(stageId, digest, offset, bytes.subarray(offset, end));
        if (!Number.isSafeInteger(nextOffset) || nextOffset <= offset || nextOffset > length) {
          throw new WardenHttpError(502, { code: "upload-offset-invalid", detail: `the node acknowledged offset ${nextOffset} for a chunk [${offset}, ${end})` }, { method: "PATCH", path: `/v1/stages/${stageId}/blobs/${digest}` });
        }
        offset = nextOffset;
        this.#advance(digest, offset);
        await this.#options.hooks?.afterChunk?.({ ...chunk, nextOffset });
        this.#report("uploading");
      } catch (error) {
        // Nothing of the chunk was taken: it goes again, within the node's limit.
        if (this.#fitLimit(error, chunk.length)) {
          this.#bytesSent -= chunk.length;
          continue;
        }
        if (failures++ >= this.#retries) throw error;
        offset = await this.#recover(stageId, digest, error, failures - 1);
      }
    }
    if (sent) this.#blobsSent++;
    this.#settle(digest);
    this.#report("uploading");
  }

  /** Where to continue a blob after a failed chunk, or rethrows a failure that is not transient. */
  async #recover(stageId: string, digest: string, error: unknown, attempt: number): Promise<number> {
    if (hasCode(error, "chunk-out-of-order", "blob-digest-mismatch") && error.expectedOffset !== undefined) {
      this.#advance(digest, error.expectedOffset);
      return error.expectedOffset;
    }
    if (!isTransient(error) && !hasCode(error, "chunk-out-of-order")) throw error;
    await sleep(backoffDelay(attempt, this.#backoffMs));
    let status: StageStatus;
    try {
      status = await this.#api.stageStatus(stageId, { retry: false });
    } catch (resync) {
      if (!isTransient(resync)) throw resync;
      return this.#offsets.get(digest) ?? 0;
    }
    const entry = status.missing.find((m) => m.digest === digest);
    const length = this.#byDigest.get(digest)!.component.blob.byte_len;
    // Absent from `missing`: the node holds the whole blob (the lost reply was an acknowledgement).
    const offset = entry?.offset ?? length;
    this.#advance(digest, offset);
    return offset;
  }
}

/** Compiles `dir`, uploads what the node is missing and commits; see the module comment. */
export async function pushDirectory(api: StageApi, dir: string, options: PushOptions = {}): Promise<PushResult> {
  const compiled = await compileForPush(dir, options);
  const result = await new PushRun(api, compiled, options).run();
  // Every request that carried the compiled bytes has been answered (a node answers an upload
  // once it has read the whole body), so nothing reads them any more. A failed push keeps its
  // slab out of the cache: that every request it sent has ended is not known.
  if (compiled.slab !== undefined) sharedSlabCache().give(compiled.slab);
  return { ...result, skipped: compiled.skipped };
}
