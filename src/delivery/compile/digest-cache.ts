/**
 * Digests a compile has already taken, reused by the next compile of the same files: pushing one
 * tree to many nodes (or again after a failure) hashes its bytes once, not once per push.
 *
 * A file's digest is reused only when the file still has the identity it had when it was read:
 * device, inode, size, mtime and ctime, all in nanoseconds (what readStable already checks around
 * every read, so the bytes digested were the bytes of that identity). The ctime is what makes this
 * safe: every write and every chmod, rename or utimes moves it, and no system call sets it back,
 * so a tool that restores the mtime after editing a file (`touch -r`, rsync -t, an archive
 * extractor) still changes the file's identity.
 *
 * One gap remains: file system timestamps are coarse (a clock tick; two seconds on FAT), so a file
 * written again within the same tick as the write before its read can keep its size and both
 * times. As git does with its index ("racy" entries), a digest is therefore kept only for a file
 * whose ctime is older than the read by more than RACY_MARGIN_NS: any later write then gets a
 * later ctime. A file changed moments before a push is simply hashed again next time.
 *
 * The bundle digest is a function of the files' paths, lengths and contents, hence (sha256 being
 * collision resistant) of their paths, lengths and blob digests: when every file's digest is
 * reused, so is the bundle digest of the same list. Wrong digests could not corrupt a node anyway
 * (it checks every byte against its digest, G8); the identity rule is what keeps a push from
 * answering "already there" for a tree that changed.
 */
import { createHash, type BinaryLike } from "node:crypto";
import type { BigIntStats } from "node:fs";
import { BoundedMap } from "../../core/bounded-map.js";
import type { Digest } from "../../core/digest.js";

/** How much older than the read a file's ctime must be for its digest to be kept. */
export const RACY_MARGIN_NS = 3_000_000_000n;
/** Files remembered at most (about 300 bytes each): the least recently used are forgotten. */
const MAX_FILES = 100_000;
const MAX_BUNDLES = 1_000;

export interface DigestCacheOptions {
  /** clock seam for tests: the wall clock, in ns since the epoch */
  readonly nowNs?: () => bigint;
}

interface Remembered {
  readonly identity: string;
  readonly digest: Digest;
}

function identityOf(stat: BigIntStats): string {
  return `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}`;
}

export class DigestCache {
  readonly #nowNs: () => bigint;
  readonly #files = new BoundedMap<string, Remembered>(MAX_FILES, Number.MAX_SAFE_INTEGER);
  readonly #bundles = new BoundedMap<string, Digest>(MAX_BUNDLES, Number.MAX_SAFE_INTEGER);
  #hits = 0;
  #misses = 0;

  constructor(options: DigestCacheOptions = {}) {
    this.#nowNs = options.nowNs ?? (() => BigInt(Date.now()) * 1_000_000n);
  }

  /** Files whose digest was reused, and files that had to be hashed, so far. */
  get hits(): number {
    return this.#hits;
  }
  get misses(): number {
    return this.#misses;
  }

  /** The clock reading a compile takes before it reads any file (see `remember`). */
  now(): bigint {
    return this.#nowNs();
  }

  /** The digest of the file at `absolutePath` if it still has identity `stat`. */
  lookup(absolutePath: string, stat: BigIntStats): Digest | undefined {
    const known = this.#files.get(absolutePath);
    if (known !== undefined && known.identity === identityOf(stat)) {
      this.#hits++;
      return known.digest;
    }
    this.#misses++;
    return undefined;
  }

  /**
   * Keeps `digest` for the file at `absolutePath` read with identity `stat`, unless its times are
   * too recent to tell a later write apart (`readStartNs`: the clock before the read began).
   */
  remember(absolutePath: string, stat: BigIntStats, digest: Digest, readStartNs: bigint): void {
    if (stat.ctimeNs + RACY_MARGIN_NS > readStartNs || stat.mtimeNs + RACY_MARGIN_NS > readStartNs) {
      this.#files.delete(absolutePath);
      return;
    }
    this.#files.set(absolutePath, { identity: identityOf(stat), digest }, 1);
  }

  /** The bundle digest of exactly these files (in manifest order), when known. */
  bundleDigest(files: readonly BundleEntry[]): Digest | undefined {
    return this.#bundles.get(listingKey(files));
  }

  rememberBundle(files: readonly BundleEntry[], digest: Digest): void {
    this.#bundles.set(listingKey(files), digest, 1);
  }
}

/** One file of a bundle, as its bundle digest depends on it. */
export interface BundleEntry {
  readonly relativePath: string;
  readonly byteLength: number;
  readonly digest: Digest;
}

function listingKey(files: readonly BundleEntry[]): string {
  const hash = createHash("sha256");
  const update = (part: BinaryLike): void => void hash.update(part);
  for (const f of files) update(`${JSON.stringify(f.relativePath)}\0${f.byteLength}\0${f.digest}\n`);
  return hash.digest("hex");
}

let shared: DigestCache | undefined;

/** The process-wide cache pushes use unless given another. */
export function sharedDigestCache(): DigestCache {
  shared ??= new DigestCache();
  return shared;
}
