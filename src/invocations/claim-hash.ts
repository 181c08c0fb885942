/**
 * The claim hash: a digest over a claim row's identity and outcome fields, stored in the row and
 * recomputed on every read. A row edited outside warden (a changed request hash, run id, result
 * hash or journal seal) no longer matches and is refused instead of being replayed or re-run.
 * Liveness fields (owner, released) and the receipt are outside it: the receipt signs a snapshot
 * that contains this hash, so the hash must not change when the receipt is attached.
 *
 * The hashed text is the RFC 8785 canonical JSON of
 * `{v: 1, scope, id, request_hash, agent, run_id, created_at, result: null | {hash, recorded_at,
 * journal: {entries, tail_hash, bytes, sha256}}}`. It is built here with JSON.stringify over keys
 * inserted in canonical (UTF-16) order — for strings and safe integers that IS the canonical form
 * (RFC 8785 serializes both exactly as JSON.stringify does) — because this runs on every replay
 * and for every seeded row, at a quarter of canonicalJson's cost. A test checks it against
 * canonicalDigest over arbitrary rows.
 */
import { sha256Digest, type Digest } from "../core/digest.js";
import type { ClaimRecord } from "./claim-store.js";

export type HashedClaimFields = Pick<ClaimRecord, "scope" | "id" | "request_hash" | "agent" | "run_id" | "created_at" | "result">;

/** The object whose canonical JSON the claim hash is taken over (keys in canonical order). */
export function claimHashInput(claim: HashedClaimFields): Record<string, unknown> {
  const result = claim.result;
  return {
    agent: claim.agent,
    created_at: claim.created_at,
    id: claim.id,
    request_hash: claim.request_hash,
    result:
      result === undefined
        ? null
        : {
            hash: result.hash,
            journal: {
              bytes: result.journal.bytes,
              entries: result.journal.entries,
              sha256: result.journal.sha256,
              tail_hash: result.journal.tail_hash,
            },
            recorded_at: result.recorded_at,
          },
    run_id: claim.run_id,
    scope: claim.scope,
    v: 1,
  };
}

export function claimHashOf(claim: HashedClaimFields): Digest {
  return sha256Digest(JSON.stringify(claimHashInput(claim)));
}
