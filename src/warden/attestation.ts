/**
 * `GET /v1/runs/{id}/attestation`: the node's signed in-toto statement about a run's change set
 * (DESIGN.md "Attestations"). Every fact comes from what the node already signed or logged — the
 * verified journal, the catalog's commit of the bundle, the transparency log's leaf — so the
 * attestation says nothing the journal and the log do not also prove.
 */
import type { JsonValue } from "../core/canonical.js";
import { isDigest, type Digest } from "../core/digest.js";
import { NotFoundError, WardenError } from "../core/errors.js";
import type { JournalEntry, PublicKeyRecord, SigningKey } from "../journal/types.js";
import { verifyJournal } from "../journal/verify.js";
import { IN_TOTO_PAYLOAD_TYPE, signEnvelope, type DsseEnvelope } from "../attestation/dsse.js";
import { runStatement, statementPayload, type AttestedBundle, type RunPredicate, type RunStatement } from "../attestation/statement.js";
import { leafHash } from "../tlog/merkle.js";

export interface AttestationSources {
  readonly journal: Uint8Array;
  readonly maxBytes: number;
  readonly keys: readonly PublicKeyRecord[];
  readonly signingKey: SigningKey;
  /** the catalog's digests of a committed revision */
  readonly bundle: (bundleId: string, revision: string) => Promise<{ readonly bundle_digest: string; readonly manifest_digest: string }>;
  /** the transparency log, when the node keeps one */
  readonly log?: { readonly origin: string; leaf(key: string): Promise<{ readonly index: number; readonly leaf: Buffer } | undefined> } | undefined;
}

export interface RunAttestation {
  readonly statement: RunStatement;
  readonly envelope: DsseEnvelope;
}

type Fields = Readonly<Record<string, unknown>>;

/** Builds and signs the statement about run `runId`; refuses a run whose journal does not verify or that has no change set. */
export async function attestRun(runId: string, sources: AttestationSources): Promise<RunAttestation> {
  // Synchronous: an attestation is an operator's occasional request, and its journal is bounded (maxBytes).
  const report = verifyJournal(sources.journal, sources.keys, { maxBytes: sources.maxBytes, runId });
  if (!report.ok || report.first_error !== undefined) {
    const e = report.first_error;
    throw new WardenError("attestation-journal-invalid", `run ${runId}'s journal does not verify (line ${e?.line ?? "?"}: ${e?.code ?? "?"}): the node attests nothing of it`, 409, {
      details: { run_id: runId, ...(e === undefined ? {} : { line: e.line, journal_code: e.code }) },
    });
  }
  const entries = report.valid;
  const started = eventOf(entries, "run.started");
  const changes = eventOf(entries, "run.changes");
  if (started === undefined || changes === undefined || !isDigest(changes.change_set)) {
    const why = changes === undefined ? "its journal has no run.changes entry (not a git workspace, or the run has not ended)" : "its change set could not be made";
    throw new NotFoundError("run-changes-not-found", `run ${runId} has no change set to attest: ${why}`, { details: { run_id: runId } });
  }
  const terminated = eventOf(entries, "run.terminated");
  const invocation = started.invocation as { scope: string; id: string; request_hash: string };
  const predicate: RunPredicate = {
    run_id: runId,
    invocation: { scope: invocation.scope, id: invocation.id, request_hash: invocation.request_hash },
    ...(typeof terminated?.reason === "string" ? { termination: terminated.reason } : {}),
    changes: {
      digest: changes.change_set as Digest,
      ...(typeof changes.base === "string" ? { base_commit: changes.base } : {}),
      files: typeof changes.files_total === "number" ? changes.files_total : 0,
    },
    ...(await bundleOf(started, sources)),
    ...providerOf(started, entries),
    ...isolationOf(started),
    ...policyOf(started),
    journal: { key_id: entries[entries.length - 1]!.key_id, entries: report.entries, head: report.tail_hash },
    ...(await logOf(runId, sources)),
  };
  const statement = runStatement(predicate);
  return { statement, envelope: signEnvelope(IN_TOTO_PAYLOAD_TYPE, statementPayload(statement), sources.signingKey) };
}

function eventOf(entries: readonly JournalEntry[], type: string): Fields | undefined {
  const entry = entries.find((e) => e.event.type === type);
  return entry === undefined ? undefined : (entry.event as unknown as Fields);
}

async function bundleOf(started: Fields, sources: AttestationSources): Promise<{ bundle?: AttestedBundle }> {
  const b = started.bundle as { bundle_id?: unknown; revision?: unknown; signers?: JsonValue } | undefined;
  if (b === undefined || typeof b.bundle_id !== "string" || typeof b.revision !== "string") return {};
  // The revision the run started is committed (a run starts only a committed one) and commits are immutable.
  const { bundle_digest, manifest_digest } = await sources.bundle(b.bundle_id, b.revision);
  return { bundle: { bundle_id: b.bundle_id, revision: b.revision, bundle_digest, manifest_digest, ...(b.signers === undefined ? {} : { signers: b.signers }) } };
}

/** The provider, and its CLI's version when the CLI reported one (Claude Code's system/init, journaled as `agent_session`). */
function providerOf(started: Fields, entries: readonly JournalEntry[]): { provider?: RunPredicate["provider"] } {
  if (typeof started.provider !== "string") return {};
  let version: string | undefined;
  for (const e of entries) {
    if (e.event.type !== "note") continue;
    const session = (e.event as { agent_session?: { claude_code_version?: unknown; cli_version?: unknown } }).agent_session;
    const v = session?.claude_code_version ?? session?.cli_version;
    if (typeof v === "string") {
      version = v;
      break;
    }
  }
  return { provider: { name: started.provider, ...(version === undefined ? {} : { cli_version: version }) } };
}

function isolationOf(started: Fields): { isolation?: RunPredicate["isolation"] } {
  const i = started.isolation as { digest?: unknown; profile?: { kind?: unknown } } | undefined;
  if (i === undefined || typeof i.digest !== "string") return {};
  return { isolation: { ...(typeof i.profile?.kind === "string" ? { kind: i.profile.kind } : {}), digest: i.digest } };
}

/** A policy the run ran under, where its run.started names one by digest. */
function policyOf(started: Fields): { policy?: RunPredicate["policy"] } {
  const p = started.policy as { digest?: unknown } | undefined;
  return p !== undefined && isDigest(p.digest) ? { policy: { digest: p.digest } } : {};
}

/** The run's leaf in the log: its seal when it was recorded, else the receipt that reconciled it. */
async function logOf(runId: string, sources: AttestationSources): Promise<{ log?: RunPredicate["log"] }> {
  const log = sources.log;
  if (log === undefined) return {};
  for (const [key, statement] of [[`run:${runId}`, "run.sealed"], [`reconciled:${runId}`, "run.reconciled"]] as const) {
    const found = await log.leaf(key);
    if (found !== undefined) {
      return { log: { origin: log.origin, index: found.index, leaf_hash: leafHash(found.leaf).toString("hex"), statement } };
    }
  }
  return {};
}

