import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import fc from "fast-check";
import {
  appendNodes,
  consistencyProof,
  EMPTY_ROOT,
  frontier,
  inclusionProof,
  leafHash,
  nodeHash,
  nodeKey,
  nodesRead,
  treeHash,
  verifyConsistency,
  verifyInclusion,
  type Hash,
} from "../../src/tlog/merkle.js";

/** RFC 6962 §2.1 MTH straight from its definition, with no stored nodes. */
function mth(leaves: readonly Hash[]): Hash {
  if (leaves.length === 0) return createHash("sha256").digest();
  if (leaves.length === 1) return leaves[0]!;
  let k = 1;
  while (k * 2 < leaves.length) k *= 2;
  return nodeHash(mth(leaves.slice(0, k)), mth(leaves.slice(k)));
}

/** A log kept as the stored nodes only, grown by appendNodes in batches. */
class MemoryLog {
  readonly nodes = new Map<string, Hash>();
  readonly leaves: Hash[] = [];
  append(batch: readonly Hash[]): void {
    const edge = new Map(frontier(this.leaves.length).map((n) => [nodeKey(n.level, n.index), this.read(n.level, n.index)] as const));
    for (const n of appendNodes(this.leaves.length, edge, batch)) this.nodes.set(nodeKey(n.level, n.index), n.hash);
    this.leaves.push(...batch);
  }
  read = (level: number, index: number): Hash => {
    const h = this.nodes.get(nodeKey(level, index));
    if (h === undefined) throw new Error(`node ${level}/${index} not stored`);
    return h;
  };
}

function leavesOf(n: number, salt = ""): Hash[] {
  return Array.from({ length: n }, (_, i) => leafHash(Buffer.from(`leaf ${salt}${i}`)));
}

describe("RFC 6962 Merkle tree", () => {
  test("RFC 6962 hashes: empty tree, leaf and node prefixes", () => {
    assert.equal(EMPTY_ROOT.toString("hex"), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    // The Certificate Transparency test vector: leaf hash of the empty leaf.
    assert.equal(leafHash(Buffer.alloc(0)).toString("hex"), "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d");
    assert.equal(nodeHash(Buffer.alloc(32), Buffer.alloc(32)).toString("hex"), createHash("sha256").update(Buffer.concat([Buffer.from([1]), Buffer.alloc(64)])).digest("hex"));
  });

  test("stored nodes give the tree hash of every size (batches of any length, tile boundaries, non powers of two)", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 300 }), { minLength: 1, maxLength: 12 }), (batches) => {
        const log = new MemoryLog();
        let all: Hash[] = [];
        for (const [i, size] of batches.entries()) {
          const batch = leavesOf(size, `${i}.`);
          log.append(batch);
          all = all.concat(batch);
          assert.deepEqual(treeHash(all.length, log.read), mth(all));
        }
        // Amortized O(1) writes: fewer than two stored nodes per leaf.
        assert.ok(log.nodes.size < 2 * all.length);
      }),
      { numRuns: 60 },
    );
  });

  test("inclusion and consistency proofs verify between any two sizes of a growing log (up to thousands of leaves)", () => {
    const log = new MemoryLog();
    const all = leavesOf(4100);
    log.append(all);
    const roots = new Map<number, Hash>();
    const rootOf = (n: number): Hash => roots.get(n) ?? roots.set(n, mth(all.slice(0, n))).get(n)!;
    fc.assert(
      fc.property(
        fc.oneof(fc.integer({ min: 1, max: 4100 }), fc.constantFrom(1, 255, 256, 257, 511, 512, 513, 4095, 4096, 4097)),
        fc.nat(),
        fc.nat(),
        (size, a, b) => {
          const index = a % size;
          const root = rootOf(size);
          assert.deepEqual(treeHash(size, log.read), root);
          const proof = inclusionProof(index, size, log.read);
          assert.ok(verifyInclusion(index, size, all[index]!, proof, root));
          // Another leaf, another index, another root, a cut proof: each fails.
          assert.equal(verifyInclusion(index, size, leafHash(Buffer.from("other")), proof, root), false);
          if (size > 1) assert.equal(verifyInclusion((index + 1) % size, size, all[index]!, proof, root), false);
          if (proof.length > 0) assert.equal(verifyInclusion(index, size, all[index]!, proof.slice(1), root), false);
          const old = b % (size + 1);
          const cproof = consistencyProof(old, size, log.read);
          assert.ok(verifyConsistency(old, size, rootOf(old), root, cproof), `consistency ${old} → ${size}`);
          if (old > 0 && old < size) {
            assert.equal(verifyConsistency(old, size, rootOf(old), root, cproof.slice(0, -1)), false);
            // A forked old tree: same size, a different leaf.
            const forked = mth([...all.slice(0, old - 1), leafHash(Buffer.from("fork"))]);
            assert.equal(verifyConsistency(old, size, forked, root, cproof), false);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  test("a dry run names exactly the stored nodes a proof reads, O(log n) of them", () => {
    const log = new MemoryLog();
    log.append(leavesOf(1000));
    const needed = nodesRead((read) => inclusionProof(700, 1000, read));
    assert.ok(needed.length <= 2 * Math.ceil(Math.log2(1000)));
    const only = new Map(needed.map((n) => [nodeKey(n.level, n.index), log.read(n.level, n.index)]));
    const proof = inclusionProof(700, 1000, (l, i) => only.get(nodeKey(l, i))!);
    assert.deepEqual(proof, inclusionProof(700, 1000, log.read));
  });
});
