/**
 * Rows for bulk seeding (benchmarks, load tests): copies of one recorded claim under new ids.
 * Every copy shares the template's run, journal and result, and carries its own correct claim
 * hash, so it reads back as a normal recorded claim through every check a replay makes. Feed
 * them to a backend's bulk import (EmbeddedClaimStore.importRecorded).
 */
import { randomUUID } from "node:crypto";
import { ValidationError } from "../core/errors.js";
import { claimHashOf } from "./claim-hash.js";
import type { ClaimRecord } from "./claim-store.js";

export function* recordedCopies(template: ClaimRecord, count: number, idOf: (index: number) => string = () => randomUUID()): Generator<ClaimRecord> {
  if (template.result === undefined || template.receipt !== undefined) {
    throw new ValidationError("seed-template-not-recorded", "the template must be a recorded claim");
  }
  for (let i = 0; i < count; i++) {
    const row: { -readonly [K in keyof ClaimRecord]: ClaimRecord[K] } = {
      scope: template.scope,
      id: idOf(i),
      request_hash: template.request_hash,
      agent: template.agent,
      run_id: template.run_id,
      owner: template.owner,
      created_at: template.created_at,
      released: false,
      claim_hash: template.claim_hash,
      result: template.result,
    };
    row.claim_hash = claimHashOf(row);
    yield row;
  }
}
