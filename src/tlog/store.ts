/**
 * What the transparency log needs from a backend (DESIGN.md "Transparency"): leaves with their
 * stored Merkle nodes, appended in one sequence per log (per fleet on PostgreSQL), and the signed
 * checkpoints and witness cosignatures it published.
 */
import type { Hash, NodeId } from "./merkle.js";

export interface LeafInput {
  /** what the leaf is about, unique in the log (`run:<run_id>`, `bundle:<id>@<rev>`, …): a leaf is logged once */
  readonly key: string;
  /** the leaf's bytes: the canonical JSON of its statement */
  readonly body: Buffer;
}

export interface StoredCheckpoint {
  readonly size: number;
  /** the signed note, as served */
  readonly note: string;
}

export interface LogStore {
  /**
   * Appends the leaves whose key is not logged yet, with the Merkle nodes they complete, in one
   * durable transaction that is serialized with every other appender of the log. Resolves with
   * each leaf's index (the existing one for a key already logged). With `watermark`, the store
   * keeps the larger of it and the stored one in that same transaction (also for no new leaf).
   */
  append(leaves: readonly LeafInput[], watermark?: number): Promise<number[]>;
  /**
   * The catch-up watermark (ms): every durable fact the node attests that became durable before it
   * is in the log (log.ts); undefined for a log that never had one.
   */
  watermark(): Promise<number | undefined>;
  /** leaves in the log now */
  size(): Promise<number>;
  /** stored node hashes by nodeKey; a node that is not stored is missing from the map */
  nodes(ids: readonly NodeId[]): Promise<Map<string, Hash>>;
  /** leaf bodies [from, to) */
  leaves(from: number, to: number): Promise<Buffer[]>;
  indexOf(key: string): Promise<number | undefined>;
  latestCheckpoint(): Promise<StoredCheckpoint | undefined>;
  checkpoint(size: number): Promise<StoredCheckpoint | undefined>;
  /** Stores a checkpoint the log signed (a size is signed once: a second one for it is ignored). */
  saveCheckpoint(checkpoint: StoredCheckpoint): Promise<void>;
  /** Keeps the cosignature lines a witness returned for the checkpoint of `size` (one answer per witness and size). */
  saveCosignature(size: number, witness: string, lines: string): Promise<void>;
  /** witness name → its cosignature lines on the checkpoint of `size` */
  cosignatures(size: number): Promise<ReadonlyMap<string, string>>;
  /** witness name → the largest size it cosigned */
  witnessed(): Promise<ReadonlyMap<string, number>>;
  close(): Promise<void>;
}

/**
 * How a store appends `leaves` to a log of `size`: each input's index (`logged` answers a key's
 * existing one; a key twice in the batch gets one index) and the leaves to write, in order, from
 * index `size` on. Called under the store's append lock, so `logged` sees every earlier batch.
 */
export function planAppend(size: number, leaves: readonly LeafInput[], logged: (key: string) => number | undefined): { indexes: number[]; added: LeafInput[] } {
  const fresh = new Map<string, number>();
  const added: LeafInput[] = [];
  const indexes = leaves.map((leaf) => {
    const known = fresh.get(leaf.key) ?? logged(leaf.key);
    if (known !== undefined) return known;
    const index = size + added.length;
    fresh.set(leaf.key, index);
    added.push(leaf);
    return index;
  });
  return { indexes, added };
}
