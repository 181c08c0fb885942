/**
 * The memory a compile reads its files into (one SharedArrayBuffer, directory.ts's slotsOf), kept
 * for the next compile in this process. Fresh memory is paid for at first touch: on the machines
 * issue 34 measured, taking in a new 32 MiB slab cost a compile about 8,000 page faults, some
 * 150 ms of CPU across its threads and 100 ms of its wall time (144 ms against 44 with the slab
 * reused), more than reading and hashing the bytes. A process that pushes again (a long-running
 * client, a push to one node after another) reuses the slab instead; a one-shot `warden push`
 * pays it once, as before.
 *
 * A slab is given back only by whoever holds the last view on it, once nothing can still read or
 * write through one: the compile itself when it hands out no contents, a push once every request
 * that carried its bytes has been answered. Anything else (a failed compile, whose reads ahead may
 * still be landing; a failed push; a caller keeping the contents) never gives it back, and it is
 * collected like any other memory. A kept slab is let go after KEEP_MS without a compile taking it.
 */

/** How long a slab nobody took is kept. */
export const KEEP_MS = 30_000;

export class SlabCache {
  #kept: SharedArrayBuffer | undefined;
  #timer: NodeJS.Timeout | undefined;
  readonly #keepMs: number;

  constructor(options: { readonly keepMs?: number } = {}) {
    this.#keepMs = options.keepMs ?? KEEP_MS;
  }

  /** A slab of at least `bytes`: the kept one when it is large enough (it is then no longer kept), else a new one. */
  take(bytes: number): SharedArrayBuffer {
    const kept = this.#kept;
    if (kept !== undefined && kept.byteLength >= bytes) {
      this.#drop();
      return kept;
    }
    return new SharedArrayBuffer(bytes);
  }

  /**
   * Keeps `slab` for the next `take`: the caller holds no view on it any more and nothing reads or
   * writes it. Of two slabs the larger is kept (it serves every compile the smaller would).
   */
  give(slab: SharedArrayBuffer): void {
    if (this.#kept !== undefined && this.#kept.byteLength > slab.byteLength) return;
    this.#drop();
    this.#kept = slab;
    this.#timer = setTimeout(() => this.#drop(), this.#keepMs);
    // A kept slab never holds a process open.
    this.#timer.unref();
  }

  /** Bytes kept for the next compile (0 when none). */
  get keptBytes(): number {
    return this.#kept?.byteLength ?? 0;
  }

  #drop(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#kept = undefined;
  }
}

let shared: SlabCache | undefined;

/** The process-wide cache `warden push` and WardenClient.push compile with. */
export function sharedSlabCache(): SlabCache {
  shared ??= new SlabCache();
  return shared;
}
