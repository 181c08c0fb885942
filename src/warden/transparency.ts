/**
 * Opens the node's transparency log for the facade (DESIGN.md "Transparency"): its store beside
 * the node's other state, its origin, its witnesses, and the statements the node logs of itself
 * (its public keys: the first at the first start, each rotation at the next).
 */
import { join } from "node:path";
import { EmbeddedLogStore, LOG_DATABASE } from "../backends/embedded/log/log-store.js";
import { ConflictError } from "../core/errors.js";
import type { KeyStore } from "../journal/types.js";
import { parseCheckpointText } from "../tlog/checkpoint.js";
import { TransparencyLog, type TransparencyLogOptions } from "../tlog/log.js";
import { parseNote } from "../tlog/note.js";
import { sha256Digest } from "../core/digest.js";
import type { Attest, Statement } from "../tlog/statements.js";
import type { LogStore } from "../tlog/store.js";
import type { CommitReceipt } from "../delivery/manifest-types.js";
import type { CatalogEntry } from "../delivery/catalog.js";
import type { DeliveryAttest } from "../delivery/bundle-catalog.js";
import type { StoredSignature } from "../delivery/signature-record.js";
import { signerView } from "../signing/policy.js";

/**
 * The log's options as the facade takes them: TransparencyLog's own (its interval, witnesses,
 * retry, margin, test faults), with the origin optional (default `warden.local/<first key id>`)
 * and the store and key the facade's.
 */
export type LogOptions = Omit<TransparencyLogOptions, "store" | "origin" | "key"> & { readonly origin?: string };

export interface OpenedLog {
  readonly log: TransparencyLog;
  /** appends, counting instead of throwing: a log failure never fails a run or a commit */
  readonly attest: Attest;
  readonly failures: () => number;
  /** counts a failure that happened elsewhere than in `attest` (the catch-up at start) */
  readonly countFailure: () => void;
}

export async function openEmbeddedLog(home: string, keys: KeyStore, options: LogOptions): Promise<OpenedLog> {
  return openLog(new EmbeddedLogStore(join(home, LOG_DATABASE)), keys, options);
}

export async function openLog(store: LogStore, keys: KeyStore, options: LogOptions): Promise<OpenedLog> {
  try {
    const published = await keys.publicKeys();
    // The first key is the fleet's on PostgreSQL (one key table), so every node's default agrees.
    const origin = options.origin ?? `warden.local/${published[0]?.key_id ?? (await keys.active()).key_id}`;
    await checkOrigin(store, origin);
    const { origin: _given, ...tuning } = options;
    const log = new TransparencyLog({ ...tuning, store, origin, key: () => keys.active() });
    await Promise.all(published.map((k) => log.append({ v: 1, type: "key.published", key_id: k.key_id, public_key: k.public_key })));
    await log.open();
    let failures = 0;
    const attest: Attest = (statement: Statement, at?: number) =>
      log.append(statement, at).catch(() => {
        failures++;
      });
    return {
      log,
      attest,
      failures: () => failures,
      countFailure: () => {
        failures++;
      },
    };
  } catch (error) {
    await store.close();
    throw error;
  }
}

/**
 * A log has one name: checkpoints of one tree under two origins (a node restarted with another
 * `--log-origin`, or a fleet's nodes started with different ones) would be refused by witnesses
 * and by every policy naming the other, so such a start is refused instead.
 */
async function checkOrigin(store: LogStore, origin: string): Promise<void> {
  const latest = await store.latestCheckpoint();
  if (latest === undefined) return;
  const signed = parseCheckpointText(parseNote(latest.note).text).origin;
  if (signed !== origin) {
    throw new ConflictError(
      "log-origin-mismatch",
      `the transparency log's checkpoints are signed as ${signed}, and this node would sign them as ${origin}: start it with --log-origin ${signed} (every node of a fleet alike)`,
      { details: { logged: signed, configured: origin } },
    );
  }
}

export function bundleStatement(receipt: CommitReceipt): Statement {
  return {
    v: 1,
    type: "bundle.committed",
    bundle_id: receipt.bundle_id,
    revision: receipt.revision,
    bundle_digest: receipt.bundle_digest,
    manifest_digest: receipt.manifest_digest,
    // Who vouched for the bundle is part of what the node attests: a signer list rewritten later
    // (with the node's key) then disagrees with the logged one.
    ...(receipt.signers === undefined || receipt.signers.length === 0 ? {} : { signers: receipt.signers }),
  };
}

/** A signature added to a committed revision after its commit: its own leaf (the commit's is logged once). */
export function signatureStatement(entry: CatalogEntry, signature: StoredSignature): Statement {
  const { principals, fingerprint, key_type, signed_at } = signerView(signature);
  return {
    v: 1,
    type: "bundle.signed",
    bundle_id: entry.bundle_id,
    revision: entry.revision,
    manifest_digest: entry.manifest_digest,
    fingerprint,
    key_type,
    principals,
    signed_at,
    signature_sha256: sha256Digest(signature.signature),
  };
}

/** What delivery tells the log: each commit at its committed_at, each later signature at its signed_at. */
export function deliveryAttest(attest: Attest): DeliveryAttest {
  return {
    commit: (entry) => attest(bundleStatement(entry.receipt), entry.committed_at),
    signed: (entry, signature) => attest(signatureStatement(entry, signature), signature.signed_at),
  };
}
