/**
 * The checks a stored result passes before it is replayed: the claim row is intact (fields well
 * formed, payload matching its hash, claim hash matching the row) and the journal is still the
 * one that was sealed with the result (seal.ts).
 *
 * Both checks are pure functions of what was just read. A replay re-reads the row and the whole
 * journal file every time, and when those are equal, field for field and byte for byte, to inputs
 * that passed before, the same checks would pass again: hashing them again would only cost the
 * replay path its time. So the inputs that passed are remembered (bounded, oldest forgotten
 * first) and compared instead. Any change to the row or to one byte of the journal makes the
 * inputs differ, and the full check runs on what is stored now.
 *
 * Only inputs of runs replayed twice within the memory's reach are remembered: ids that cycle
 * through more runs than it holds would never be found in it, and copying each journal into it
 * only to evict it later made every such replay slower (allocation that outlives young GCs).
 */
import { isDigest, sha256Digest, type Digest } from "../core/digest.js";
import { BoundedMap, RecentSightings } from "../core/bounded-map.js";
import { IntegrityError } from "../core/errors.js";
import { isUuid } from "../journal/schema.js";
import { claimHashOf } from "./claim-hash.js";
import type { ClaimState, JournalSeal } from "./claim-store.js";
import type { JournalDigest } from "../journal/types.js";
import { digestMatchesSeal, matchesSeal } from "./seal.js";

/** Refuses a row whose fields are malformed or do not match its claim hash. */
export function checkClaimIntegrity(claim: ClaimState): void {
  const corrupt = (what: string): IntegrityError =>
    new IntegrityError("claim-record-corrupt", `claim ${JSON.stringify([claim.scope, claim.id])} is damaged (${what}); it is neither replayed nor re-run`, {
      status: 500,
    });
  if (!isDigest(claim.request_hash) || !isUuid(claim.run_id) || !isDigest(claim.claim_hash)) throw corrupt("malformed fields");
  const result = claim.result;
  if (result !== undefined) {
    if (!isDigest(result.hash) || !isDigest(result.journal.sha256)) throw corrupt("malformed result fields");
    if (result.payload === undefined && result.pruned_at === undefined) throw corrupt("result payload missing");
    if (result.payload !== undefined && sha256Digest(result.payload) !== result.hash) throw corrupt("result payload does not match its hash");
  }
  if (claimHashOf(claim) !== claim.claim_hash) throw corrupt("claim hash mismatch");
}

/** Every field checkClaimIntegrity reads (liveness, owner and receipt are not among them). */
function sameCheckedFields(a: ClaimState, b: ClaimState): boolean {
  if (
    a.scope !== b.scope ||
    a.id !== b.id ||
    a.request_hash !== b.request_hash ||
    a.agent !== b.agent ||
    a.run_id !== b.run_id ||
    a.created_at !== b.created_at ||
    a.claim_hash !== b.claim_hash
  ) {
    return false;
  }
  const r = a.result;
  const s = b.result;
  if (r === undefined || s === undefined) return r === s;
  return (
    r.hash === s.hash &&
    r.payload === s.payload &&
    r.recorded_at === s.recorded_at &&
    r.pruned_at === s.pruned_at &&
    sameSeal(r.journal, s.journal)
  );
}

function sameSeal(a: JournalSeal, b: JournalSeal): boolean {
  return a.entries === b.entries && a.tail_hash === b.tail_hash && a.bytes === b.bytes && a.sha256 === b.sha256;
}

interface SealedJournal {
  /** the whole journal (journalMatches) or its tail (digestMatches) */
  readonly bytes: Buffer;
  readonly whole: boolean;
  readonly seal: JournalSeal;
  readonly runId: string;
  readonly resultHash: Digest;
}

export interface ReplayCheckBounds {
  /** inputs remembered per check */
  readonly entries: number;
  /** bytes of payloads and journals remembered per check; a larger single input is not kept */
  readonly bytes: number;
}

export const DEFAULT_REPLAY_CHECK_BOUNDS: ReplayCheckBounds = { entries: 4096, bytes: 8 * 1024 * 1024 };

/** The replay checks of one Invocations service, remembering the inputs that passed. */
export class ReplayChecks {
  readonly #claims: BoundedMap<string, ClaimState>;
  readonly #journals: BoundedMap<string, SealedJournal>;
  readonly #claimSightings: RecentSightings;
  readonly #journalSightings: RecentSightings;

  constructor(bounds: ReplayCheckBounds = DEFAULT_REPLAY_CHECK_BOUNDS) {
    this.#claims = new BoundedMap(bounds.entries, bounds.bytes);
    this.#journals = new BoundedMap(bounds.entries, bounds.bytes);
    this.#claimSightings = new RecentSightings(bounds.entries);
    this.#journalSightings = new RecentSightings(bounds.entries);
  }

  /** How many inputs are remembered now, per check. */
  get remembered(): { readonly claims: number; readonly journals: number } {
    return { claims: this.#claims.size, journals: this.#journals.size };
  }

  /** checkClaimIntegrity, answered by comparison when the same row passed before. */
  claimIntegrity(claim: ClaimState): void {
    const key = claim.run_id;
    const passed = this.#claims.get(key);
    if (passed !== undefined && sameCheckedFields(passed, claim)) return;
    try {
      checkClaimIntegrity(claim);
    } catch (error) {
      this.#claims.delete(key);
      throw error;
    }
    if (this.#claimSightings.seenRecently(key)) this.#claims.set(key, claim, claim.result?.payload?.length ?? 0);
  }

  /** matchesSeal, answered by comparison when the same bytes matched the same seal before. */
  journalMatches(bytes: Uint8Array, seal: JournalSeal, runId: string, resultHash: Digest): boolean {
    return this.#sealCheck(bytes, true, seal, runId, resultHash, () => matchesSeal(bytes, seal, runId, resultHash));
  }

  /** digestMatchesSeal, answered by comparison when the same tail matched the same seal before. */
  digestMatches(digest: JournalDigest, seal: JournalSeal, runId: string, resultHash: Digest): boolean {
    // Length and sha256 are compared every time (the store computed them now); only the tail's
    // hashing and parsing is what memory saves.
    if (digest.bytes !== seal.bytes || digest.sha256 !== seal.sha256) return false;
    return this.#sealCheck(digest.tail, false, seal, runId, resultHash, () => digestMatchesSeal(digest, seal, runId, resultHash));
  }

  #sealCheck(bytes: Uint8Array, whole: boolean, seal: JournalSeal, runId: string, resultHash: Digest, check: () => boolean): boolean {
    const passed = this.#journals.get(runId);
    if (
      passed !== undefined &&
      passed.whole === whole &&
      passed.runId === runId &&
      passed.resultHash === resultHash &&
      sameSeal(passed.seal, seal) &&
      passed.bytes.equals(bytes)
    ) {
      return true;
    }
    if (!check()) {
      this.#journals.delete(runId);
      return false;
    }
    if (!this.#journalSightings.seenRecently(runId)) return true;
    // A copy: the caller's buffer is its own to reuse.
    this.#journals.set(runId, { bytes: Buffer.from(bytes), whole, seal, runId, resultHash }, bytes.byteLength);
    return true;
  }
}
