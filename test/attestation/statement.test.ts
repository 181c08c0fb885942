/**
 * The run statement from a signed journal: every predicate member comes from the verified journal,
 * the bundle's commit and the log's leaf; the envelope verifies with securesystemslib; a journal
 * that does not verify, or has no change set, is not attested.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import { canonicalDigest } from "../../src/core/canonical.js";
import { sha256Digest } from "../../src/core/digest.js";
import { generateSigningKey } from "../../src/journal/keys.js";
import { lineHash } from "../../src/journal/line.js";
import type { JournalEvent } from "../../src/journal/types.js";
import { leafHash } from "../../src/tlog/merkle.js";
import { envelopeJson, verifyEnvelope } from "../../src/attestation/dsse.js";
import { attestRun, type AttestationSources } from "../../src/warden/attestation.js";
import { buildLines, recordOf, REQUEST_HASH } from "../journal/helpers.js";
import { tempDir } from "../support/temp.js";
import { verifyWithSecuresystemslib } from "./intoto-verifier.js";

const BASE = "c0ffee".padEnd(40, "0");
const CHANGE_SET = sha256Digest("a manifest's bytes");
const PROFILE = { v: 1, kind: "none", env: [] };
const ISOLATION = canonicalDigest(PROFILE);
const SIGNERS = [{ principals: ["alice@example.com"], fingerprint: "SHA256:abc", key_type: "ssh-ed25519", signed_at: "2026-01-01T00:00:00.000Z" }];

function events(): JournalEvent[] {
  return [
    {
      type: "run.started",
      invocation: { scope: "api:alice", id: "inv-7", request_hash: REQUEST_HASH },
      agent: "claude",
      provider: "claude",
      bundle: { bundle_id: "review-tools", revision: "r1", signers: SIGNERS },
      isolation: { profile: PROFILE, digest: ISOLATION },
      base: BASE,
    },
    { type: "note", agent_session: { provider: "claude", claude_code_version: "2.1.197", skills: [], plugins: [] } },
    { type: "run.changes", base: BASE, change_set: CHANGE_SET, no_changes: false, files_total: 3, files: [] },
    { type: "run.terminated", reason: "completed", result_hash: `sha256:${"cd".repeat(32)}` },
  ] as JournalEvent[];
}

describe("the run statement", () => {
  let dir: string;
  before(() => {
    dir = tempDir("attest-statement");
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const { key } = generateSigningKey();
  const leaf = Buffer.from('{"type":"run.sealed","v":1}');
  function sources(journal: Buffer): AttestationSources {
    return {
      journal,
      maxBytes: 1 << 20,
      keys: [recordOf(key)],
      signingKey: key,
      bundle: async (id, revision) => {
        assert.deepEqual([id, revision], ["review-tools", "r1"]);
        return { bundle_digest: sha256Digest("bundle"), manifest_digest: sha256Digest("manifest") };
      },
      log: { origin: "warden.test/log", leaf: async (k) => (k.startsWith("run:") ? { index: 41, leaf } : undefined) },
    };
  }

  it("names the change set as subject and the run's sources in the predicate; securesystemslib verifies it", async () => {
    const runId = randomUUID();
    const lines = buildLines(events(), key, { runId });
    const { statement, envelope } = await attestRun(runId, sources(Buffer.concat(lines)));
    assert.deepEqual(statement.subject, [{ name: `warden:run/${runId}/changes`, digest: { sha256: CHANGE_SET.slice(7) } }]);
    assert.deepEqual(statement.predicate, {
      run_id: runId,
      invocation: { scope: "api:alice", id: "inv-7", request_hash: REQUEST_HASH },
      termination: "completed",
      changes: { digest: CHANGE_SET, base_commit: BASE, files: 3 },
      bundle: { bundle_id: "review-tools", revision: "r1", bundle_digest: sha256Digest("bundle"), manifest_digest: sha256Digest("manifest"), signers: SIGNERS },
      provider: { name: "claude", cli_version: "2.1.197" },
      isolation: { kind: "none", digest: ISOLATION },
      journal: { key_id: key.key_id, entries: 4, head: lineHash(lines.at(-1)!) },
      log: { origin: "warden.test/log", index: 41, leaf_hash: leafHash(leaf).toString("hex"), statement: "run.sealed" },
    });
    const keys = { keys: [recordOf(key)] };
    const verdict = await verifyWithSecuresystemslib(dir, envelopeJson(envelope), keys);
    assert.equal(verdict.ok, true, `${verdict.error ?? ""} ${verdict.stderr}`);
    assert.deepEqual(verdict.statement, JSON.parse(JSON.stringify(statement)));
    assert.equal(verifyEnvelope(envelope, keys.keys).key_id, key.key_id);
  });

  it("refuses a journal that does not verify, and a run with no change set", async () => {
    const runId = randomUUID();
    const lines = buildLines(events(), key, { runId });
    const forged = Buffer.concat(lines);
    forged[forged.indexOf("completed")] = "C".charCodeAt(0);
    await assert.rejects(attestRun(runId, sources(forged)), { code: "attestation-journal-invalid" });
    const plain = events().filter((e) => e.type !== "run.changes");
    await assert.rejects(attestRun(runId, sources(Buffer.concat(buildLines(plain, key, { runId })))), { code: "run-changes-not-found" });
  });
});
