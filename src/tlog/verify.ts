/**
 * What an auditor checks without trusting the node (docs/transparency.md): that a run's journal
 * is the one whose seal the log holds, by an inclusion proof to a checkpoint the policy accepts;
 * and that two checkpoints of the log are consistent (one is a prefix of the other).
 */
import { canonicalJson } from "../core/canonical.js";
import { sha256Digest } from "../core/digest.js";
import { ValidationError } from "../core/errors.js";
import { decodeBase64Strict } from "../core/base64.js";
import { lineHash } from "../journal/line.js";
import { parseCheckpointText, type Checkpoint } from "./checkpoint.js";
import { inconsistent, malformed } from "./errors.js";
import { HASH_BYTES, leafHash, verifyConsistency, verifyInclusion, type Hash } from "./merkle.js";
import { openNote, parseNote, type NoteVerifier } from "./note.js";
import { verifyCheckpoint, type Policy, type VerifiedCheckpoint } from "./policy.js";
import type { ReconciliationStatement, RunSealStatement, Statement } from "./statements.js";

/** What `GET /v1/log/runs/{run_id}` answers, and what `journal verify --proof FILE` reads. */
export interface RunProofDocument {
  readonly index: number;
  readonly size: number;
  readonly proof: readonly string[];
  readonly leaf: string;
  readonly checkpoint: string;
}

export interface LoggedRun {
  readonly statement: RunSealStatement;
  readonly checkpoint: VerifiedCheckpoint;
  readonly index: number;
}

export function parseHashes(texts: readonly unknown[]): Hash[] {
  return texts.map((t) => {
    const h = typeof t === "string" ? decodeBase64Strict(t, HASH_BYTES) : undefined;
    if (h === undefined) throw malformed("log-proof-invalid", "a proof hash is standard base64 of 32 bytes");
    return h;
  });
}

/** Reads a run proof document (JSON), refusing any other shape. */
export function parseRunProof(value: unknown): RunProofDocument {
  const v = value as Partial<Record<keyof RunProofDocument, unknown>> | null;
  if (
    typeof v !== "object" || v === null ||
    !Number.isSafeInteger(v.index) || !Number.isSafeInteger(v.size) || !Array.isArray(v.proof) ||
    typeof v.leaf !== "string" || typeof v.checkpoint !== "string"
  ) {
    throw malformed("log-proof-invalid", "a run proof is {index, size, proof: [base64…], leaf, checkpoint}");
  }
  return { index: v.index as number, size: v.size as number, proof: v.proof as string[], leaf: v.leaf, checkpoint: v.checkpoint };
}

/** The seal of a journal's bytes, as the node logs it when the run's result is recorded. */
export function journalSeal(bytes: Uint8Array): { entries: number; tail_hash: string; bytes: number; sha256: string } {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let entries = 0;
  let start = 0;
  let last: Buffer = Buffer.alloc(0);
  while (start < buf.byteLength) {
    const end = buf.indexOf(0x0a, start);
    const stop = end < 0 ? buf.byteLength : end + 1;
    last = buf.subarray(start, stop);
    entries++;
    start = stop;
  }
  return { entries, tail_hash: lineHash(last), bytes: buf.byteLength, sha256: sha256Digest(buf) };
}

/**
 * The document's leaf, parsed, after checking that the checkpoint verifies under `policy` and that
 * the leaf is included in it; refused unless it is a canonical statement of `type`.
 */
function includedStatement<T extends Statement>(document: RunProofDocument, policy: Policy, type: T["type"]): { statement: T; checkpoint: VerifiedCheckpoint } {
  const checkpoint = verifyCheckpoint(document.checkpoint, policy);
  if (checkpoint.size !== document.size) throw malformed("log-proof-invalid", `the proof is for size ${document.size}, the checkpoint has ${checkpoint.size}`);
  let statement: T;
  try {
    statement = JSON.parse(document.leaf) as T;
  } catch {
    throw malformed("log-proof-invalid", "the leaf is not JSON");
  }
  if (canonicalJson(statement) !== document.leaf || statement.type !== type) throw malformed("log-proof-invalid", `the leaf is not a canonical ${type} statement`);
  if (!verifyInclusion(document.index, document.size, leafHash(Buffer.from(document.leaf, "utf8")), parseHashes(document.proof), checkpoint.root)) {
    throw inconsistent("the leaf's inclusion proof does not lead to the checkpoint's root", { index: document.index, size: document.size });
  }
  return { statement, checkpoint };
}

/**
 * Checks that `journal` (the run's bytes) is the run whose seal the log holds: the checkpoint
 * verifies under `policy` (the node's key and a quorum of witnesses), the leaf is included in it,
 * and the leaf's seal is this journal's. Throws `note-not-verified`, `log-proof-invalid` or
 * `log-seal-mismatch`.
 */
export function verifyLoggedRun(journal: Uint8Array, runId: string, document: RunProofDocument, policy: Policy): LoggedRun {
  const { statement, checkpoint } = includedStatement<RunSealStatement>(document, policy, "run.sealed");
  const seal = journalSeal(journal);
  const differs = (["entries", "tail_hash", "bytes", "sha256"] as const).filter((k) => seal[k] !== statement[k]);
  if (statement.run_id !== runId) differs.unshift("run_id" as never);
  if (differs.length > 0) {
    throw new ValidationError("log-seal-mismatch", `this journal is not the one the log holds for run ${runId}: ${differs.join(", ")} differ`, {
      status: 422,
      details: { run_id: runId, differs },
    });
  }
  return { statement, checkpoint, index: document.index };
}

export interface LoggedReconciliation {
  readonly statement: ReconciliationStatement;
  readonly checkpoint: VerifiedCheckpoint;
  readonly index: number;
}

/**
 * Checks that `receipt` (a reconciliation receipt, as the node serves it) is the one the log holds
 * for run `runId`: the checkpoint verifies under `policy`, the `run.reconciled` leaf is included
 * in it, and the leaf names this run, the receipt's invocation and operator, and the sha256 of the
 * receipt's canonical JSON. Throws as `verifyLoggedRun`, `log-receipt-mismatch` for another receipt.
 */
export function verifyLoggedReconciliation(
  receipt: { readonly operator: string; readonly snapshot: { readonly scope: string; readonly id: string } },
  runId: string,
  document: RunProofDocument,
  policy: Policy,
): LoggedReconciliation {
  const { statement, checkpoint } = includedStatement<ReconciliationStatement>(document, policy, "run.reconciled");
  const expected = { run_id: runId, scope: receipt.snapshot.scope, id: receipt.snapshot.id, operator: receipt.operator, receipt_sha256: sha256Digest(canonicalJson(receipt)) };
  const differs = (Object.keys(expected) as (keyof typeof expected)[]).filter((k) => expected[k] !== statement[k]);
  if (differs.length > 0) {
    throw new ValidationError("log-receipt-mismatch", `this receipt is not the one the log holds for run ${runId}: ${differs.join(", ")} differ`, {
      status: 422,
      details: { run_id: runId, differs },
    });
  }
  return { statement, checkpoint, index: document.index };
}

/**
 * Checks two checkpoints of one log, each signed by one of `logs`: equal sizes must have equal
 * roots; otherwise `proof` must show the smaller tree is a prefix of the larger. Throws
 * `tlog-inconsistent` (422) for a fork or a rollback.
 */
export function verifyCheckpointConsistency(oldNote: string, newNote: string, proof: readonly string[], logs: readonly NoteVerifier[]): { old: Checkpoint; new: Checkpoint } {
  const open = (note: string): Checkpoint => {
    const parsed = parseNote(note);
    openNote(parsed, logs);
    return parseCheckpointText(parsed.text);
  };
  let a = open(oldNote);
  let b = open(newNote);
  if (a.origin !== b.origin) throw inconsistent(`the checkpoints are of two logs: ${a.origin} and ${b.origin}`);
  if (a.size > b.size) [a, b] = [b, a];
  if (a.size === b.size) {
    if (!a.root.equals(b.root)) throw inconsistent(`two different trees of size ${a.size}: the log forked`, { size: a.size });
    return { old: a, new: b };
  }
  if (!verifyConsistency(a.size, b.size, a.root, b.root, parseHashes(proof))) {
    throw inconsistent(`the tree of size ${a.size} is not a prefix of the tree of size ${b.size}`, { old: a.size, size: b.size });
  }
  return { old: a, new: b };
}
