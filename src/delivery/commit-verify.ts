/**
 * What a commit checks before anything is published or recorded (G7, G8): every component's
 * bytes read back — from the blob store, or from the stage's partial for a blob received but not
 * yet published — the bundle digest recomputed over them in path order, and the bundle contract's
 * content rules on the same bytes: one read of each component for all of it.
 *
 * Each blob is checked against its digest at commit. Bytes of a blob this process hashed to its
 * digest as they were received are checked through the bundle digest: it covers every byte read
 * here, so any byte changed since it was received fails it (the blobs are then hashed one by one
 * to name the changed one). Every other blob (a stored one, or one received before a restart) is
 * hashed on its own.
 *
 * A commit can also use the same checks made as the stage was uploaded (`InlineCommitCheck`): as
 * the blobs arrive (each blob's chunks in order; blobs complete in any order and are taken in path
 * order), each component's bytes are fed to the bundle digest and the contract's content rules,
 * on the bytes that were just hashed to the blob's digest and written, and each partial's identity
 * (store-defined: for files device, inode, size and times, which every write moves on) is noted
 * once its last byte is written. The commit then reads nothing back: it checks that every partial
 * still has that identity, that is, still holds the bytes that were checked. Otherwise (a chunk out
 * of order, a restart, a partial changed since) it reads and checks everything as above.
 */
import { digestEquals, type Digest } from "../core/digest.js";
import { ConflictError, IntegrityError, isWardenError } from "../core/errors.js";
import type { Limits } from "../core/limits.js";
import { checkBufferable, readVerifiedBlob, verifyBytes } from "./blob-store.js";
import { checkContractContent, contentBytesRead } from "./contract/check.js";
import { BundleDigestBuilder, type BlobRef, type Component, type Manifest } from "./manifest-types.js";
import type { DeliveryStores } from "./recovery.js";
import type { StageRecord, StageStore } from "./stage.js";

/** Components read ahead (bounds the memory held to this many files). */
const READ_AHEAD = 4;

/**
 * `verifiedOnReceipt(digest)`: this process hashed the blob's complete partial to its digest as
 * the bytes arrived (and the partial has not been replaced since).
 */
export async function verifyForCommit(
  stores: DeliveryStores,
  stage: StageRecord,
  limits: Limits,
  verifiedOnReceipt: (digest: Digest) => boolean,
): Promise<void> {
  const manifest = stage.manifest;
  const components = manifest.components;
  const received = new Set(stage.blobs.filter((b) => !b.complete).map((b) => b.digest));
  const trusted = (ref: BlobRef): boolean => received.has(ref.digest) && verifiedOnReceipt(ref.digest);
  const read = (ref: BlobRef, into?: Uint8Array): Promise<Uint8Array> =>
    readForCommit(stores, stage, ref, limits, received.has(ref.digest), trusted(ref), into);
  const builder = new BundleDigestBuilder();
  // Partials are read into a few reused buffers: 32 MiB of fresh buffers per commit costs page
  // faults and garbage collections.
  const buffers = new ReadBuffers(Math.max(0, ...components.map((c) => c.blob.byte_len)));
  // Reads (and their digests) run ahead on the I/O threads while this thread feeds the bundle digest.
  const ahead = new Map<number, Promise<Uint8Array>>();
  const readAhead = (index: number): Promise<Uint8Array> => {
    let pending = ahead.get(index);
    if (pending === undefined) {
      const ref = components[index]!.blob;
      pending = read(ref, received.has(ref.digest) ? buffers.take() : undefined);
      pending.catch(() => undefined); // awaited when its turn comes; never an unhandled rejection
      ahead.set(index, pending);
    }
    return pending;
  };
  let fed = 0;
  let lent: Uint8Array | undefined;
  try {
    await checkContractContent(manifest, async (component) => {
      // The contract is done with the previous component's bytes when it asks for the next.
      if (lent !== undefined) buffers.give(lent);
      lent = undefined;
      // The contract reads components once each in manifest order; if it ever did not, the
      // digest is recomputed below in a pass of its own rather than from a wrong order.
      if (fed < 0 || component !== components[fed]) {
        fed = -1;
        return read(component.blob);
      }
      for (let next = fed + 1; next < Math.min(fed + 1 + READ_AHEAD, components.length); next++) readAhead(next);
      const bytes = await readAhead(fed);
      ahead.delete(fed);
      lent = bytes;
      builder.file(component.relative_path, component.blob.byte_len).update(bytes);
      fed++;
      return bytes;
    });
  } finally {
    // Reads started ahead of a failure must end before the caller moves on (nothing may be
    // published while a read of its partial is in flight).
    await Promise.allSettled(ahead.values());
  }
  const actual = fed === components.length ? builder.digest() : await bundleDigestOf(stage, read);
  if (!digestEquals(actual, manifest.bundle_digest)) {
    // A trusted blob whose bytes changed since they were received is the likelier cause: name it.
    for (const ref of new Map(components.map((c) => [c.blob.digest, c.blob])).values()) {
      if (trusted(ref)) await readForCommit(stores, stage, ref, limits, true, false);
    }
    throw new IntegrityError("bundle-digest-mismatch", `the blobs hash to bundle digest ${actual}, the manifest says ${manifest.bundle_digest}`, {
      details: { expected: manifest.bundle_digest, actual },
    });
  }
}

async function bundleDigestOf(stage: StageRecord, read: (ref: BlobRef) => Promise<Uint8Array>): Promise<Digest> {
  const builder = new BundleDigestBuilder();
  for (const component of stage.manifest.components) {
    builder.file(component.relative_path, component.blob.byte_len).update(await read(component.blob));
  }
  return builder.digest();
}

/**
 * A blob's bytes for commit: a received one from its partial (hashed here unless `trusted`), a
 * stored one verified from the blob store. A blob that is missing or fails verification is asked
 * for again (bytes that do not match their address are garbage and are dropped), so the client
 * can repair the stage instead of failing every commit.
 */
async function readForCommit(
  stores: DeliveryStores,
  stage: StageRecord,
  ref: BlobRef,
  limits: Limits,
  fromPartial: boolean,
  trusted: boolean,
  into?: Uint8Array,
): Promise<Uint8Array> {
  checkBufferable(ref, limits.fileBytes);
  try {
    if (!fromPartial) return await readVerifiedBlob(stores.blobs, ref, limits.fileBytes);
    const bytes = await readPartialForCommit(stores, stage, ref, into);
    if (!trusted) await verifyBytes(ref, bytes);
    return bytes;
  } catch (error) {
    if (!isWardenError(error) || (error.code !== "blob-tampered" && error.code !== "blob-not-found")) throw error;
    if (error.code === "blob-tampered" && !fromPartial) await stores.blobs.delete(ref.digest);
    await stores.stages.requireBlob(stage.stage_id, ref);
    if (error.code === "blob-tampered") throw error;
    throw new ConflictError("stage-incomplete", `blob ${ref.digest} is no longer stored; upload it again`, {
      details: { stage_id: stage.stage_id, digest: ref.digest },
    });
  }
}

/**
 * The whole partial (its length is checked when it is made durable and published), or, when its
 * publication already happened and only the commit is missing, the stored blob.
 */
async function readPartialForCommit(stores: DeliveryStores, stage: StageRecord, ref: BlobRef, into?: Uint8Array): Promise<Uint8Array> {
  if ((await stores.stages.partialLength(stage.stage_id, ref.digest)) === undefined) return stores.blobs.read(ref);
  try {
    return await stores.stages.readPartial(stage.stage_id, ref.digest, 0, ref.byte_len, into);
  } catch (error) {
    if (isWardenError(error) && error.code === "stage-partial-short") {
      throw new IntegrityError("blob-tampered", `the partial of ${ref.digest} is shorter than ${ref.byte_len} bytes`, {
        details: { digest: ref.digest, byte_len: ref.byte_len },
      });
    }
    throw error;
  }
}

/** Equal-sized buffers handed out and given back; the views returned by reads are given back whole. */
class ReadBuffers {
  readonly #size: number;
  readonly #free: Uint8Array[] = [];
  readonly #ours = new WeakSet<ArrayBufferLike>();

  constructor(size: number) {
    this.#size = size;
  }

  take(): Uint8Array {
    const buffer = this.#free.pop() ?? new Uint8Array(this.#size);
    this.#ours.add(buffer.buffer);
    return buffer;
  }

  /** Takes back the buffer under `view` if it is one of ours (a stored blob's bytes are not). */
  give(view: Uint8Array): void {
    if (this.#ours.has(view.buffer) && view.byteOffset === 0) this.#free.push(new Uint8Array(view.buffer, 0, this.#size));
  }
}

/**
 * Files larger than this are not checked inline: a file's chunks are held until its last one
 * arrives (the contract's rules read a file whole).
 */
const INLINE_MAX_FILE_BYTES = 1024 * 1024;
/**
 * Bytes held for the check at once: files that arrived ahead of one before them in path order
 * (a client uploads several blobs at once), and files whose last chunk has not come yet. A stage
 * uploaded in an order that needs more than this is checked at commit instead.
 */
const INLINE_MAX_HELD_BYTES = 16 * 1024 * 1024;

/**
 * The commit's checks made while the stage is uploaded (see the module comment). Each file's
 * chunks must come in order; files may complete in any order (several blobs upload at once) and
 * are fed to the bundle digest and the contract's rules in path order as soon as the ones before
 * them are complete. A chunk out of its file's order, a component whose bytes will not arrive
 * through this stage (a stored blob, a blob used twice), more held than INLINE_MAX_HELD_BYTES or
 * a failed rule ends it: it then never passes, and the commit checks everything itself, which also
 * reports what went wrong.
 */
export class InlineCommitCheck {
  readonly #manifest: Manifest;
  readonly #builder = new BundleDigestBuilder();
  #digest: Digest | undefined;
  /** Component index of each blob (every component's blob is uploaded here, once). */
  readonly #indexOf: ReadonlyMap<Digest, number>;
  /** The component the bundle digest takes next. */
  #next = 0;
  /** Files still arriving (their chunks so far), and complete ones waiting for their turn, by index. */
  readonly #arriving = new Map<number, { position: number; pieces: Uint8Array[] }>();
  readonly #complete = new Map<number, Uint8Array[]>();
  #held = 0;
  /** Components' bytes handed to the contract's rules, by index, until they ask for them. */
  readonly #delivered = new Map<number, Uint8Array>();
  #waiting: { readonly index: number; readonly resolve: (bytes: Uint8Array) => void; readonly reject: (error: unknown) => void } | undefined;
  readonly #contract: Promise<boolean>;
  /** Blobs whose every byte was checked here, with their partial's identity once written. */
  readonly #identities = new Map<Digest, string>();
  #ended = false;

  /** Starts the check for a stage none of whose blobs has any byte yet; undefined when none can run. */
  static async start(stages: StageStore, stageId: string): Promise<InlineCommitCheck | undefined> {
    if (stages.partialIdentity === undefined) return undefined;
    const stage = await stages.get(stageId);
    if (stage === undefined || stage.blobs.some((b) => b.complete || b.received > 0)) return undefined;
    // Every file's bytes must come through this stage (not a stored or empty blob's), once, and be
    // small enough to hold until its last chunk arrives.
    const uploaded = new Set(stage.blobs.map((b) => b.digest));
    const components = stage.manifest.components;
    const fits = (c: Component): boolean => uploaded.has(c.blob.digest) && c.blob.byte_len <= INLINE_MAX_FILE_BYTES;
    if (!components.every(fits) || new Set(components.map((c) => c.blob.digest)).size !== components.length) return undefined;
    return new InlineCommitCheck(stage.manifest);
  }

  private constructor(manifest: Manifest) {
    this.#manifest = manifest;
    const components = manifest.components;
    this.#indexOf = new Map(components.map((c, i) => [c.blob.digest, i]));
    this.#contract = checkContractContent(manifest, (component) => {
      const index = components.indexOf(component);
      const bytes = this.#delivered.get(index);
      this.#delivered.delete(index);
      if (bytes !== undefined) return Promise.resolve(bytes);
      return new Promise((resolve, reject) => {
        // Bytes handed over once are not kept: a rule that asked again (or out of order) ends it.
        if (this.#ended || index < this.#next || this.#waiting !== undefined) reject(ended());
        else this.#waiting = { index, resolve, reject };
      });
    }).then(
      () => true,
      () => {
        // A failed rule ends the check: nothing more is held for it (the commit reports the rule).
        this.end();
        return false;
      },
    );
  }

  /**
   * `piece`, at `offset` of blob `digest`, is being received (as it is hashed to the blob's digest
   * and written; a chunk that then fails must `end` the check).
   */
  feed(digest: Digest, offset: number, piece: Uint8Array): void {
    if (this.#ended) return;
    const index = this.#indexOf.get(digest);
    if (index === undefined || index < this.#next || this.#complete.has(index)) return this.end();
    let file = this.#arriving.get(index);
    if (file === undefined) {
      file = { position: 0, pieces: [] };
      this.#arriving.set(index, file);
    }
    if (offset !== file.position) return this.end();
    file.pieces.push(piece);
    file.position += piece.byteLength;
    this.#held += piece.byteLength;
    if (this.#held > INLINE_MAX_HELD_BYTES) return this.end();
    if (file.position < this.#manifest.components[index]!.blob.byte_len) return;
    this.#arriving.delete(index);
    this.#complete.set(index, file.pieces);
    this.#identities.set(digest, "");
    // Every complete file whose turn has come goes to the bundle digest and the rules, in path
    // order. Its pieces are hashed where they are, and the rules get only the bytes they read:
    // joining every file's pieces cost a copy of the whole bundle per push.
    for (let pieces = this.#complete.get(this.#next); pieces !== undefined; pieces = this.#complete.get(this.#next)) {
      this.#complete.delete(this.#next);
      const component = this.#manifest.components[this.#next]!;
      const hash = this.#builder.file(component.relative_path, component.blob.byte_len);
      for (const piece of pieces) hash.update(piece);
      this.#held -= component.blob.byte_len;
      this.#deliver(leading(pieces, contentBytesRead(component)));
    }
  }

  /** The identity of blob `digest`'s partial once its last byte was written. */
  written(digest: Digest, identity: string | undefined): void {
    if (!this.#identities.has(digest) || identity === undefined) this.end();
    else this.#identities.set(digest, identity);
  }

  /** Ends the check: it will not pass. */
  end(): void {
    this.#ended = true;
    this.#delivered.clear();
    this.#arriving.clear();
    this.#complete.clear();
    this.#held = 0;
    this.#waiting?.reject(ended());
    this.#waiting = undefined;
  }

  /**
   * True when every component was checked here and every partial still has the identity it had
   * once written: the commit need not read the stage back.
   */
  async passed(stages: StageStore, stageId: string): Promise<boolean> {
    if (this.#ended || this.#next !== this.#manifest.components.length) {
      this.end();
      return false;
    }
    this.#digest ??= this.#builder.digest();
    if (!(await this.#contract) || !digestEquals(this.#digest, this.#manifest.bundle_digest)) return false;
    for (const [digest, identity] of this.#identities) {
      if (identity === "" || (await stages.partialIdentity!(stageId, digest)) !== identity) return false;
    }
    return true;
  }

  #deliver(bytes: Uint8Array): void {
    const index = this.#next;
    this.#next++;
    if (this.#waiting?.index === index) {
      const waiting = this.#waiting;
      this.#waiting = undefined;
      waiting.resolve(bytes);
    } else this.#delivered.set(index, bytes);
  }
}

/** The first `length` bytes of `pieces` (all of them when shorter), copied only if they span pieces. */
function leading(pieces: readonly Uint8Array[], length: number): Uint8Array {
  const first = pieces[0] ?? new Uint8Array(0);
  if (first.byteLength >= length) return first.subarray(0, length);
  return Buffer.concat(pieces, Math.min(length, pieces.reduce((sum, p) => sum + p.byteLength, 0)));
}

function ended(): ConflictError {
  return new ConflictError("inline-check-ended", "the inline commit check ended");
}
