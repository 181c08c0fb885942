/**
 * RFC 6962 / RFC 9162 Merkle tree hashing over SHA-256 (DESIGN.md "Transparency"): leaf and node
 * hashes, the hashes a log stores, tree heads, inclusion and consistency proofs and their checks.
 *
 * A log stores one hash per *complete* aligned subtree: node (level, index) is the Merkle Tree
 * Hash of leaves [index·2^level, (index+1)·2^level). Appending leaf n adds one node per trailing
 * one bit of n+1 (amortized two), computed from the log's right edge (its "frontier": one node per
 * set bit of the size), so an append reads O(log n) stored hashes and writes amortized O(1).
 * Every other hash (a tree head, a proof element) is a fold over O(log n) stored nodes.
 *
 * Sizes and indexes are JavaScript numbers (exact to 2^53): never 32-bit bit operations.
 */
import { createHash } from "node:crypto";

export const HASH_BYTES = 32;

export type Hash = Buffer;

/** A stored node: the hash of the complete subtree of 2^level leaves starting at index·2^level. */
export interface NodeId {
  readonly level: number;
  readonly index: number;
}

/** Reads stored nodes; an algorithm here never reads a node outside the tree it works on. */
export type NodeReader = (level: number, index: number) => Hash;

const LEAF_PREFIX = Buffer.from([0]);
const NODE_PREFIX = Buffer.from([1]);

export function leafHash(leaf: Uint8Array): Hash {
  return createHash("sha256").update(LEAF_PREFIX).update(leaf).digest();
}

export function nodeHash(left: Uint8Array, right: Uint8Array): Hash {
  return createHash("sha256").update(NODE_PREFIX).update(left).update(right).digest();
}

/** The root of the empty tree: SHA-256 of the empty string. */
export const EMPTY_ROOT: Hash = createHash("sha256").digest();

function pow2(level: number): number {
  return 2 ** level;
}

/** The largest power of two strictly smaller than n (n ≥ 2). */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

function isOdd(n: number): boolean {
  return n % 2 === 1;
}

function half(n: number): number {
  return Math.floor(n / 2);
}

/** The stored nodes on the right edge of a tree of `size` leaves, largest (leftmost) first. */
export function frontier(size: number): NodeId[] {
  const out: NodeId[] = [];
  for (let level = Math.floor(Math.log2(Math.max(size, 1))) + 1; level >= 0; level--) {
    const index = Math.floor(size / pow2(level));
    if (isOdd(index)) out.push({ level, index: index - 1 });
  }
  return out;
}

export function nodeKey(level: number, index: number): string {
  return `${level}/${index}`;
}

/**
 * The nodes to store when `leaves` (their leaf hashes) are appended to a tree of `size` leaves
 * whose frontier hashes are `edge` (keyed by nodeKey). Pure: a backend reads the frontier, calls
 * this, and writes the result in the transaction that appends the leaves.
 */
export function appendNodes(size: number, edge: ReadonlyMap<string, Hash>, leaves: readonly Hash[]): { level: number; index: number; hash: Hash }[] {
  const known = new Map(edge);
  const out: { level: number; index: number; hash: Hash }[] = [];
  const put = (level: number, index: number, hash: Hash): void => {
    known.set(nodeKey(level, index), hash);
    out.push({ level, index, hash });
  };
  leaves.forEach((hash, offset) => {
    let index = size + offset;
    let level = 0;
    put(level, index, hash);
    let current = hash;
    while (isOdd(index)) {
      const left = known.get(nodeKey(level, index - 1));
      if (left === undefined) throw new Error(`tlog: frontier node ${level}/${index - 1} missing`);
      current = nodeHash(left, current);
      level++;
      index = half(index);
      put(level, index, current);
    }
  });
  return out;
}

/** MTH(D[lo:hi]) for a range that is a subtree of some tree (lo aligned to the split): stored nodes folded. */
export function subtreeHash(lo: number, hi: number, read: NodeReader): Hash {
  const n = hi - lo;
  if (n <= 0) throw new Error("tlog: empty subtree");
  // A complete aligned subtree is stored as one node.
  const level = Math.log2(n);
  if (Number.isInteger(level) && lo % n === 0) return read(level, lo / n);
  const k = splitPoint(n);
  return nodeHash(subtreeHash(lo, lo + k, read), subtreeHash(lo + k, hi, read));
}

export function treeHash(size: number, read: NodeReader): Hash {
  return size === 0 ? EMPTY_ROOT : subtreeHash(0, size, read);
}

/** RFC 6962 §2.1.1 PATH(index, D[0:size]): the audit path of leaf `index`, leaf side first. */
export function inclusionProof(index: number, size: number, read: NodeReader): Hash[] {
  if (!(index >= 0 && index < size)) throw new RangeError(`tlog: leaf ${index} is not in a tree of ${size}`);
  const path: Hash[] = [];
  const walk = (lo: number, hi: number): void => {
    if (hi - lo === 1) return;
    const k = splitPoint(hi - lo);
    if (index < lo + k) {
      walk(lo, lo + k);
      path.push(subtreeHash(lo + k, hi, read));
    } else {
      walk(lo + k, hi);
      path.push(subtreeHash(lo, lo + k, read));
    }
  };
  walk(0, size);
  return path;
}

/** RFC 6962 §2.1.2 PROOF(oldSize, D[0:newSize]); empty when oldSize is 0 or equals newSize. */
export function consistencyProof(oldSize: number, newSize: number, read: NodeReader): Hash[] {
  if (!(oldSize >= 0 && oldSize <= newSize)) throw new RangeError(`tlog: no consistency proof from ${oldSize} to ${newSize}`);
  if (oldSize === 0 || oldSize === newSize) return [];
  const proof: Hash[] = [];
  const sub = (m: number, lo: number, hi: number, whole: boolean): void => {
    if (m === hi - lo) {
      if (!whole) proof.push(subtreeHash(lo, hi, read));
      return;
    }
    const k = splitPoint(hi - lo);
    if (m <= k) {
      sub(m, lo, lo + k, whole);
      proof.push(subtreeHash(lo + k, hi, read));
    } else {
      sub(m - k, lo + k, hi, false);
      proof.push(subtreeHash(lo, lo + k, read));
    }
  };
  sub(oldSize, 0, newSize, true);
  return proof;
}

/**
 * The stored nodes `compute` reads, without their hashes: the algorithms above never branch on a
 * hash value, so a dry run with zero hashes names every node a real run will read. A backend
 * whose reads are asynchronous fetches them in one query, then runs `compute` for real.
 */
export function nodesRead<T>(compute: (read: NodeReader) => T): NodeId[] {
  const seen = new Map<string, NodeId>();
  const zero = Buffer.alloc(HASH_BYTES);
  compute((level, index) => {
    seen.set(nodeKey(level, index), { level, index });
    return zero;
  });
  return [...seen.values()];
}

/** RFC 9162 §2.1.3.2: does `proof` show leaf `leaf` (a leaf hash) at `index` in the tree (`size`, `root`)? */
export function verifyInclusion(index: number, size: number, leaf: Uint8Array, proof: readonly Uint8Array[], root: Uint8Array): boolean {
  if (!(Number.isSafeInteger(index) && Number.isSafeInteger(size) && index >= 0 && index < size)) return false;
  let fn = index;
  let sn = size - 1;
  let r: Uint8Array = leaf;
  for (const p of proof) {
    if (p.byteLength !== HASH_BYTES || sn === 0) return false;
    if (isOdd(fn) || fn === sn) {
      r = nodeHash(p, r);
      if (!isOdd(fn)) {
        while (!isOdd(fn) && fn !== 0) {
          fn = half(fn);
          sn = half(sn);
        }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return sn === 0 && Buffer.from(r).equals(root);
}

/** RFC 9162 §2.1.4.2: does `proof` show the tree (oldSize, oldRoot) is a prefix of (newSize, newRoot)? */
export function verifyConsistency(
  oldSize: number,
  newSize: number,
  oldRoot: Uint8Array,
  newRoot: Uint8Array,
  proof: readonly Uint8Array[],
): boolean {
  if (!(Number.isSafeInteger(oldSize) && Number.isSafeInteger(newSize) && oldSize >= 0 && oldSize <= newSize)) return false;
  if (proof.some((p) => p.byteLength !== HASH_BYTES)) return false;
  if (oldSize === newSize) return proof.length === 0 && Buffer.from(oldRoot).equals(newRoot);
  // The empty tree is a prefix of every tree; nothing to prove (C2SP tlog-witness: the proof is empty).
  if (oldSize === 0) return proof.length === 0 && Buffer.from(oldRoot).equals(EMPTY_ROOT);
  const path = Number.isInteger(Math.log2(oldSize)) ? [oldRoot, ...proof] : [...proof];
  if (path.length === 0) return false;
  let fn = oldSize - 1;
  let sn = newSize - 1;
  while (isOdd(fn)) {
    fn = half(fn);
    sn = half(sn);
  }
  let fr: Uint8Array = path[0]!;
  let sr: Uint8Array = path[0]!;
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (isOdd(fn) || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (!isOdd(fn)) {
        while (!isOdd(fn) && fn !== 0) {
          fn = half(fn);
          sn = half(sn);
        }
      }
    } else {
      sr = nodeHash(sr, c);
    }
    fn = half(fn);
    sn = half(sn);
  }
  return sn === 0 && Buffer.from(fr).equals(oldRoot) && Buffer.from(sr).equals(newRoot);
}
